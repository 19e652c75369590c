// The open_pr action's two halves against the loopback Git host with real git (`git http-backend`
// with receive-pack): the worker's pushChange runs a command in a scratch clone of the project's
// clone, commits what changed as the configured author and force-pushes the pull request's branch
// with a write-scoped installation token; the server's openOrUpdatePullRequest opens the pull
// request through the REST API, or updates the one open from that branch. A read token cannot
// push; no change pushes nothing; a failing command says so; the token is in no file and not in
// the command's environment.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { createHostApi } from '../../../services/gitHosts/hostApi.js';
import { openOrUpdatePullRequest } from '../../../services/gitHosts/pullRequests.js';
import { createOutboundClient } from '../../../storage/index.js';
import { withGitConfig } from '../../../protocol/index.js';
import { checkoutCommit } from '../../../worker/gitCheckout.js';
import { pushChange, type ChangeRequest } from '../../../worker/pullRequestChange.js';
import { createFlakeRepo } from '../../support/flakeRepo.js';
import { startTestGitHost } from '../../support/gitHost.js';
import { LOOPBACK_NETWORKS } from '../../support/kiln.js';

const INSTALLATION = 7007;
const REPOSITORY_ID = 8118;

t.test('open_pr: push the change with a write token, open or update the pull request', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-open-pr-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const host = await startTestGitHost(dir);
  t.teardown(() => host.close());
  const source = createFlakeRepo(join(dir, 'source'), { 'flake.nix': '{ outputs = _: { }; }\n', 'version': 'v1\n' });
  host.hostRepository('acme/app', REPOSITORY_ID, source.dir);
  const hosted = join(dir, 'hosted', 'acme/app.git');
  const url = `${host.url}/acme/app.git`;
  const api = createHostApi({
    apiUrl: host.url, appId: host.appId, privateKey: () => readFileSync(host.privateKeyFile, 'utf8'),
    outbound: createOutboundClient({ allowedNetworks: LOOPBACK_NETWORKS }), userAgent: 'kiln-test',
  });
  const readToken = await api.repositoryReadToken(INSTALLATION, REPOSITORY_ID);
  const writeToken = await api.repositoryWriteToken(INSTALLATION, REPOSITORY_ID);
  t.same(host.tokens.get(writeToken), { installation: INSTALLATION, repositoryIds: [REPOSITORY_ID], permissions: { contents: 'write' } }, 'the write token is scoped to the one repository, contents only');

  const workerDir = join(dir, 'worker');
  mkdirSync(workerDir);
  const checkout = await checkoutCommit(workerDir, randomUUID(), url, source.commit, process.env, undefined, { token: readToken, resolve: null });
  if (!checkout.ok) throw new Error(checkout.failure.message);
  const request = (over: Partial<ChangeRequest>): ChangeRequest => ({
    clone: checkout.clone, commit: source.commit, command: ['sh', '-c', 'echo v2 > version'], repository: url,
    access: { token: writeToken, resolve: null }, branch: 'kiln/default', author: { name: 'kiln bot', email: 'bot@kiln.invalid' },
    message: 'Update version', env: process.env, scratchDir: workerDir, ...over,
  });
  const hostedGit = (...args: string[]) => execFileSync('git', ['-C', hosted, ...args], { encoding: 'utf8' }).trim();
  const change = (title: string) => ({ installationId: INSTALLATION, repository: 'acme/app', branch: 'kiln/default', base: 'main', title, body: 'made by kiln' });

  await t.test('a change is committed as the configured author and pushed; the pull request is opened', async (t) => {
    const outcome = await pushChange(request({}));
    if (!outcome.ok) throw new Error(outcome.failure.message);
    t.ok(outcome.pushed, 'a commit was pushed');
    t.equal(host.branchHead('acme/app', 'kiln/default'), outcome.pushed, 'the host has it at the branch');
    t.equal(hostedGit('log', '-1', '--format=%an <%ae>|%cn <%ce>|%P', 'kiln/default'), `kiln bot <bot@kiln.invalid>|kiln bot <bot@kiln.invalid>|${source.commit}`, 'author, committer, on the evaluated commit');
    t.equal(hostedGit('show', 'kiln/default:version'), 'v2');
    t.ok(host.gitRequests.some((r) => r.push && r.allowed && r.token === writeToken), 'pushed with the write token');
    const opened = await openOrUpdatePullRequest(api, change('Update version'));
    t.match(opened, { number: 1, created: true, url: `${host.url}/acme/app/pull/1` });
    t.match(host.pullRequests, [{ repository: 'acme/app', number: 1, head: 'kiln/default', base: 'main', title: 'Update version', state: 'open' }]);
  });

  await t.test('the next run force-pushes the branch and updates the open pull request instead of opening another', async (t) => {
    const outcome = await pushChange(request({ command: ['sh', '-c', 'echo v3 > version'] }));
    if (!outcome.ok) throw new Error(outcome.failure.message);
    t.equal(hostedGit('show', 'kiln/default:version'), 'v3');
    t.equal(hostedGit('rev-parse', 'kiln/default^'), source.commit, 'replaced, not stacked');
    const updated = await openOrUpdatePullRequest(api, change('Update version again'));
    t.match(updated, { number: 1, created: false });
    t.equal(host.pullRequests.length, 1);
    t.equal(host.pullRequests[0]!.title, 'Update version again');
  });

  await t.test('a null author leaves the worker\'s own git identity', async (t) => {
    const env = withGitConfig(process.env, [['user.name', 'Worker Identity'], ['user.email', 'worker@kiln.invalid']]);
    const outcome = await pushChange(request({ command: ['sh', '-c', 'echo v2b > version'], author: { name: null, email: null }, env }));
    if (!outcome.ok) throw new Error(outcome.failure.message);
    t.equal(hostedGit('log', '-1', '--format=%an <%ae>', 'kiln/default'), 'Worker Identity <worker@kiln.invalid>');
    const back = await pushChange(request({ command: ['sh', '-c', 'echo v3 > version'] }));
    t.ok(back.ok, 'and back to v3 for what follows');
  });

  await t.test('nothing changed: nothing is pushed', async (t) => {
    const before = host.gitRequests.length;
    t.same(await pushChange(request({ command: ['true'] })), { ok: true, pushed: null });
    t.equal(host.gitRequests.length, before, 'no git request');
  });

  await t.test('a read token cannot push; a failing command says so and pushes nothing', async (t) => {
    const refused = await pushChange(request({ access: { token: readToken, resolve: null }, command: ['sh', '-c', 'echo v9 > version'] }));
    t.match(refused, { ok: false, failure: { reason: 'fetch_failed', message: /git push to .* failed/ } });
    t.ok(host.gitRequests.some((r) => r.push && !r.allowed && r.token === readToken), 'the host refused the read token\'s push');
    t.equal(hostedGit('show', 'kiln/default:version'), 'v3', 'the branch did not move');
    const failed = await pushChange(request({ command: ['sh', '-c', 'echo nope >&2; exit 3'] }));
    t.match(failed, { ok: false, failure: { reason: 'worker_error', message: /the command "sh -c echo nope >&2; exit 3" failed \(exit 3\): nope/ } });
  });

  await t.test('the token is in no file, and the command does not see it; no scratch clone is left', async (t) => {
    const outcome = await pushChange(request({ command: ['sh', '-c', 'env > seen-env'] }));
    if (!outcome.ok) throw new Error(outcome.failure.message);
    const seen = hostedGit('show', 'kiln/default:seen-env');
    t.ok(seen.includes('PATH='), 'the command\'s environment was recorded');
    t.notOk(seen.includes(writeToken) || seen.includes(Buffer.from(`x-access-token:${writeToken}`).toString('base64')), 'without the token');
    let files = '';
    try {
      files = execFileSync('grep', ['-rl', '--', writeToken, workerDir], { encoding: 'utf8' }).trim();
    } catch {
      // grep exits 1 when no file matches
    }
    t.equal(files, '', 'no file of the worker holds it');
    t.same(readdirSync(workerDir).filter((n) => n.startsWith('open-pr-')), [], 'scratch clones are removed');
  });
});
