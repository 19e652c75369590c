// Private repositories through the Git host application, end to end with real git and real Nix:
// the loopback Git host serves a repository only to installation tokens that cover it (real
// `git http-backend`), kiln links a project to the installation when the repository's
// .kiln-projects names it, and a real `kiln worker` process fetches and builds it with a token
// scoped to that one repository. A project of another tenant naming the same URL gets no token;
// the token is in no row and no log line; removing the line or the repository ends the link.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import t from 'tap';
import { startTestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { createFlakeRepo, shellFlake } from '../../support/flakeRepo.js';
import { examplePayload, gitHostOptions, installationPayload, pointAt, sendHook, startTestGitHost } from '../../support/gitHost.js';
import { requireNix } from '../../support/nixStore.js';
import { spawnWorker } from '../../support/workerProcess.js';
import { eventually } from '../../support/eventually.js';

requireNix();

const TIMEOUT = Number(process.env['KILN_FLOW_TIMEOUT'] ?? 180_000);
const INSTALLATION = 9001;
const REPOSITORY_ID = 5150;

const commitFile = (dir: string, name: string, text: string | null): string => {
  const git = (args: string[]) => execFileSync('git', ['-C', dir, '-c', 'user.email=t@kiln.invalid', '-c', 'user.name=t', ...args], { encoding: 'utf8' }).trim();
  if (text === null) git(['rm', '--quiet', name]);
  else {
    writeFileSync(join(dir, name), text);
    git(['add', name]);
  }
  git(['commit', '--quiet', '-m', `${name} changed`]);
  return git(['rev-parse', 'HEAD']);
};

t.test('a private repository is fetched with a token scoped to it, for the projects it names only', { timeout: TIMEOUT }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-private-repo-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const host = await startTestGitHost(dir);
  t.teardown(() => host.close());
  const logged: string[] = [];
  const log = pino({ level: 'trace' }, new Writable({ write: (chunk: Buffer, _e, done) => { logged.push(chunk.toString('utf8')); done(); } }));
  const kiln = await startTestKiln(t, { localWorker: true, 'build.retryBackoffSecs': 0, ...gitHostOptions(host) }, { log, gitHostRetryBaseMs: 20, gitHostLinkRecheckMs: 0 });

  const nonce = randomBytes(8).toString('hex');
  const source = createFlakeRepo(join(dir, 'secret'), { 'flake.nix': shellFlake(nonce, '      hello = mk "kiln-private-hello" "echo hi; mkdir $out";') });
  host.hostRepository('acme/secret', REPOSITORY_ID, source.dir);
  const url = `${host.url}/acme/secret.git`;
  // (not spawnSync: the host answers on this process's event loop)
  const anonymous = await new Promise<number | null>((resolve) => {
    execFile('git', ['ls-remote', url], { env: { ...process.env, GIT_TERMINAL_PROMPT: '0' } }, (error) => resolve(error ? (error.code as number) : 0));
  });
  t.not(anonymous, 0, 'the host serves the repository to no one without a token');

  t.equal((await sendHook(kiln.url, 'installation', installationPayload(INSTALLATION, REPOSITORY_ID, 'acme/secret'), { secret: host.secret })).status, 200, 'the installation and its repository are known');

  const cache = await createTestCache(kiln.sql, 'main', { public: true });
  const ada = await signUp(kiln, 'ada');
  const mallory = await signUp(kiln, 'mallory');
  for (const [who, org] of [[ada, 'acme'], [mallory, 'mal']] as const) {
    await kiln.api('PUT', '/orgs', { token: who.token, body: { name: org } });
    const made = await kiln.api('PUT', `/projects/${org}`, { token: who.token, body: { name: 'secret', repository: url, wildcard: 'packages.x86_64-linux.*' } });
    t.equal(made.status, 200, String(made.message));
    await kiln.sql`insert into subscriptions (project_id, cache_id, mode) select p.id, ${cache.id}, 0 from projects p join organizations o on o.id = p.organization_id where o.name = ${org}`;
  }
  const worker = spawnWorker({ serverUrl: `ws://127.0.0.1:${kiln.port}/proto`, baseDir: join(dir, 'worker'), env: { SERVICE_LOG_LEVEL_DEFAULT: 'debug' } });
  t.teardown(() => worker.stop());

  const push = async (commit: string) => {
    const payload = pointAt(examplePayload('push'), host, 'acme/secret', url, INSTALLATION);
    Object.assign(payload, { ref: 'refs/heads/main', after: commit, deleted: false });
    const sent = await sendHook(kiln.url, 'push', payload, { secret: host.secret });
    t.equal(sent.status, 200, JSON.stringify(sent.json));
    const ids = (sent.json.message as { evaluations: string[] }).evaluations;
    t.equal(ids.length, 2, 'one evaluation for each project naming the repository');
    const ended = await eventually(async () => {
      const rows = await kiln.sql<{ org: string; phase: string; error: string | null }[]>`
        select o.name as org, e.phase, e.error from evaluations e join tasks k on k.id = e.task_id join projects p on p.id = k.project_id
          join organizations o on o.id = p.organization_id
        where e.id = any(${ids}::uuid[]) and e.phase in ('completed', 'failed', 'aborted')`;
      return rows.length === 2 ? rows : null;
    }, { timeout: 0.4 * TIMEOUT, interval: 200, message: 'both evaluations end' });
    return Object.fromEntries(ended.map((r) => [r.org, r]));
  };
  const scopedTokens = () => [...host.tokens.entries()].filter(([, issued]) => issued.repositoryIds !== null);

  await t.test('without .kiln-projects nobody is linked: no token, the host refuses the fetch', async (t) => {
    const ended = await push(source.commit);
    for (const org of ['acme', 'mal']) {
      t.equal(ended[org]!.phase, 'failed', `${org}: failed`);
      t.match(ended[org]!.error, /fetch_failed/, `${org}: the fetch failed`);
    }
    t.same(scopedTokens(), [], 'no repository token was issued');
    t.ok(host.gitRequests.length > 0 && host.gitRequests.every((r) => r.token === null && !r.allowed), 'the worker came without a token and was refused');
    t.equal((await kiln.sql`select 1 from project_git_host_links`).length, 0, 'no link');
  });

  await t.test('.kiln-projects naming acme/secret links that project only; its worker fetches with a scoped read token', async (t) => {
    const commit = commitFile(source.dir, '.kiln-projects', '# projects of kiln that may build this repository\nACME/Secret\n');
    host.hostRepository('acme/secret', REPOSITORY_ID, source.dir);
    const before = host.gitRequests.length;
    const ended = await push(commit);
    t.equal(ended['acme']!.phase, 'completed', `acme: completed (${ended['acme']!.error})`);
    t.equal(ended['mal']!.phase, 'failed', 'mal: still failed');
    const links = await kiln.sql<{ org: string; installation_id: string; repository_id: string }[]>`
      select o.name as org, l.installation_id::text, l.repository_id::text from project_git_host_links l
      join projects p on p.id = l.project_id join organizations o on o.id = p.organization_id`;
    t.same(links, [{ org: 'acme', installation_id: String(INSTALLATION), repository_id: String(REPOSITORY_ID) }], 'acme/secret is linked, mal/secret is not');
    const tokens = scopedTokens();
    t.ok(tokens.length >= 1, 'a repository token was issued');
    for (const [, issued] of tokens) t.same(issued, { installation: INSTALLATION, repositoryIds: [REPOSITORY_ID], permissions: { contents: 'read' } }, 'scoped to the one repository, contents read only');
    const fetched = host.gitRequests.slice(before);
    t.ok(fetched.some((r) => r.allowed && tokens.some(([token]) => token === r.token)), 'the worker fetched with it');
    t.ok(fetched.filter((r) => r.token === null).every((r) => !r.allowed), 'the other project\'s fetch came without one');

    const secrets = [...host.tokens.keys()];
    const rows = JSON.stringify(await kiln.sql`select * from evaluations`) + JSON.stringify(await kiln.sql`select * from projects`) + JSON.stringify(await kiln.sql`select * from project_git_host_links`);
    t.notOk(secrets.some((s) => rows.includes(s)), 'no token in evaluation, project or link rows');
    t.ok(logged.length > 0, 'kiln logged');
    t.notOk(secrets.some((s) => logged.join('').includes(s)), 'no token in kiln\'s log');
    t.notOk(secrets.some((s) => JSON.stringify(worker.logs).includes(s) || worker.stderr().includes(s)), 'no token in the worker\'s log');
  });

  await t.test('removing the line unlinks at the next reading', async (t) => {
    const commit = commitFile(source.dir, '.kiln-projects', null);
    host.hostRepository('acme/secret', REPOSITORY_ID, source.dir);
    // a commit the worker's clone does not have yet: it must fetch
    const ended = await push(commit);
    t.equal(ended['acme']!.phase, 'failed', 'acme: failed to fetch again');
    t.equal((await kiln.sql`select 1 from project_git_host_links`).length, 0, 'the link is gone');
  });

  await t.test('a repository removed from the installation takes its link along', async (t) => {
    const commit = commitFile(source.dir, '.kiln-projects', 'acme/secret\n');
    host.hostRepository('acme/secret', REPOSITORY_ID, source.dir);
    t.equal((await push(commit))['acme']!.phase, 'completed', 'linked again');
    const removed = examplePayload('installation_repositories', 'removed');
    Object.assign(removed['installation'] as object, { id: INSTALLATION });
    removed['repositories_removed'] = [{ id: REPOSITORY_ID, node_id: 'R_secret', name: 'secret', full_name: 'acme/secret', private: true }];
    t.equal((await sendHook(kiln.url, 'installation_repositories', removed, { secret: host.secret })).status, 200, 'the repository is removed');
    t.equal((await kiln.sql`select 1 from project_git_host_links`).length, 0, 'no link');
  });

  await t.test('a host that cannot answer fails the evaluation at dispatch, saying why', async (t) => {
    const added = examplePayload('installation_repositories', 'added');
    Object.assign(added['installation'] as object, { id: INSTALLATION });
    added['repositories_added'] = [{ id: REPOSITORY_ID, node_id: 'R_secret', name: 'secret', full_name: 'acme/secret', private: true }];
    t.equal((await sendHook(kiln.url, 'installation_repositories', added, { secret: host.secret })).status, 200, 'the repository is back');
    host.failNext(/^GET \/repos\/acme\/secret\/contents\//, [{ status: 500 }, { status: 500 }]);
    const ended = await push(commitFile(source.dir, 'README', 'again\n'));
    t.equal(ended['acme']!.phase, 'failed');
    t.match(ended['acme']!.error, /^fetch_failed: the Git host application gave no access to the repository: .*500/, 'the error says why');
  });
});
