// A worker fetching a private repository with the token of an evalJob's `access`
// (worker/gitCheckout.ts): real git against the loopback Git host's `git http-backend`, which
// serves only to an installation token that covers the repository. The token reaches git as a
// header through the environment and is left nowhere in the clone; git connects only to the
// pinned address (a name no DNS knows resolves through the pin alone); other GIT_CONFIG_*
// settings of the worker's environment survive.
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { checkoutCommit } from '../../worker/gitCheckout.js';
import { withGitConfig } from '../../protocol/index.js';
import { createFlakeRepo } from '../support/flakeRepo.js';
import { startTestGitHost } from '../support/gitHost.js';
import { tempDir } from '../support/nixStore.js';

/** Every file under `root` whose bytes contain `needle`. */
function filesContaining(root: string, needle: string): string[] {
  const found: string[] = [];
  const walk = (path: string) => {
    const stat = statSync(path);
    if (stat.isDirectory()) for (const name of readdirSync(path)) walk(join(path, name));
    else if (readFileSync(path).includes(needle)) found.push(path);
  };
  walk(root);
  return found;
}

t.test('withGitConfig adds to what the environment sets', async (t) => {
  t.same(withGitConfig({ A: '1' }, [['http.extraHeader', 'X: y']]), { A: '1', GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'http.extraHeader', GIT_CONFIG_VALUE_0: 'X: y' });
  t.match(withGitConfig({ GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'core.x', GIT_CONFIG_VALUE_0: 'v' }, [['a.b', 'c']]), {
    GIT_CONFIG_COUNT: '2', GIT_CONFIG_KEY_0: 'core.x', GIT_CONFIG_KEY_1: 'a.b', GIT_CONFIG_VALUE_1: 'c',
  });
});

t.test('a private repository is fetched with the token, pinned, and the token stays out of the clone', async (t) => {
  const dir = tempDir('kiln-worker-private-fetch-');
  const host = await startTestGitHost(dir);
  t.teardown(() => host.close());
  const repo = createFlakeRepo(join(dir, 'app'), { 'flake.nix': '{ outputs = _: {}; }' });
  host.hostRepository('acme/app', 77, repo.dir);
  const other = createFlakeRepo(join(dir, 'other'), { 'flake.nix': '{ outputs = _: { x = 1; }; }' });
  host.hostRepository('acme/other', 78, other.dir);
  // a token as the host issues it, scoped to acme/app
  const issue = async (repositoryIds: number[]) => {
    const { createAppAuth } = await import('@octokit/auth-app');
    const auth = createAppAuth({ appId: host.appId, privateKey: readFileSync(host.privateKeyFile, 'utf8'), request: (await import('@octokit/request')).request.defaults({ baseUrl: host.url }) });
    return (await auth({ type: 'installation', installationId: 5, repositoryIds, permissions: { contents: 'read' } })).token;
  };
  const token = await issue([77]);
  const env = { ...process.env, GIT_TERMINAL_PROMPT: '0' };
  const port = new URL(host.url).port;

  const baseDir = join(dir, 'worker');
  const without = await checkoutCommit(baseDir, randomUUID(), `${host.url}/acme/app.git`, repo.commit, env);
  t.match(without, { ok: false, failure: { reason: 'fetch_failed' } }, 'without a token the host refuses');

  const project = randomUUID();
  const fetched = await checkoutCommit(baseDir, project, `${host.url}/acme/app.git`, repo.commit, env, undefined, { token, resolve: null });
  t.match(fetched, { ok: true }, 'with it the commit is fetched');
  t.ok(host.gitRequests.some((r) => r.token === token && r.allowed), 'as x-access-token with the token');
  t.same(filesContaining(join(baseDir, 'repos'), token), [], 'the token is in no file of the clones');

  const elsewhere = await checkoutCommit(baseDir, randomUUID(), `${host.url}/acme/other.git`, other.commit, env, undefined, { token, resolve: null });
  t.match(elsewhere, { ok: false, failure: { reason: 'fetch_failed' } }, 'the token opens only its repository');

  const pinned = await checkoutCommit(baseDir, randomUUID(), `http://git.kiln-pin.invalid:${port}/acme/app.git`, repo.commit, env, undefined, {
    token, resolve: `git.kiln-pin.invalid:${port}:127.0.0.1`,
  });
  t.match(pinned, { ok: true }, 'a name no DNS knows is reached through the pin alone');
  const unpinned = await checkoutCommit(baseDir, randomUUID(), `http://git.kiln-pin.invalid:${port}/acme/app.git`, repo.commit, env, undefined, { token, resolve: null });
  t.match(unpinned, { ok: false, failure: { reason: 'fetch_failed' } }, 'and not without it');
});
