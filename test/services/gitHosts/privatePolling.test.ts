// Polling a private repository through the Git host application (docs/git-hosts.md, "Polling"):
// a project linked by the repository's .kiln-projects is listed at the host's clone URL with a
// read token scoped to that repository, which reaches git through its environment only; a project
// the file does not name polls without one and the host refuses it. Real git (`git http-backend`
// in the loopback host, serving only to tokens that cover the repository), real kiln serve; no
// worker (evaluations stay queued).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import t from 'tap';
import { startTestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createFlakeRepo, shellFlake } from '../../support/flakeRepo.js';
import { gitHostOptions, installationPayload, sendHook, startTestGitHost } from '../../support/gitHost.js';
import { eventually } from '../../support/eventually.js';

const INSTALLATION = 9101;
const REPOSITORY_ID = 6161;

const commitFile = (dir: string, name: string, text: string): string => {
  const git = (args: string[]) => execFileSync('git', ['-C', dir, '-c', 'user.email=t@kiln.invalid', '-c', 'user.name=t', ...args], { encoding: 'utf8' }).trim();
  writeFileSync(join(dir, name), text);
  git(['add', name]);
  git(['commit', '--quiet', '-m', `${name} changed`]);
  return git(['rev-parse', 'HEAD']);
};

t.test('a linked private repository is polled with its scoped read token', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-private-poll-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const host = await startTestGitHost(dir);
  t.teardown(() => host.close());
  const logged: string[] = [];
  const log = pino({ level: 'trace' }, new Writable({ write: (chunk: Buffer, _e, done) => { logged.push(chunk.toString('utf8')); done(); } }));
  const kiln = await startTestKiln(t, { 'projects.minPollIntervalSecs': 1, ...gitHostOptions(host) }, { log, gitHostLinkRecheckMs: 0 });

  const source = createFlakeRepo(join(dir, 'secret'), { 'flake.nix': shellFlake(randomBytes(8).toString('hex'), '      hello = mk "hello" "mkdir $out";') });
  host.hostRepository('acme/secret', REPOSITORY_ID, source.dir);
  const url = `${host.url}/acme/secret.git`;
  t.equal((await sendHook(kiln.url, 'installation', installationPayload(INSTALLATION, REPOSITORY_ID, 'acme/secret'), { secret: host.secret })).status, 200);

  const ada = await signUp(kiln, 'ada');
  const mallory = await signUp(kiln, 'mallory');
  for (const [who, org] of [[ada, 'acme'], [mallory, 'mal']] as const) {
    await kiln.api('PUT', '/orgs', { token: who.token, body: { name: org } });
    const made = await kiln.api('PUT', `/projects/${org}`, { token: who.token, body: { name: 'secret', repository: url, wildcard: 'packages.*.*', poll_interval_secs: 1 } });
    t.equal(made.status, 200, JSON.stringify(made.message));
  }
  const heads = async (org: string) => (await kiln.sql<{ commit: string }[]>`
    select h.commit from project_polled_heads h join projects p on p.id = h.project_id join organizations o on o.id = p.organization_id
    where o.name = ${org} and h.branch = 'main'`)[0]?.commit ?? null;
  const polledEvaluations = (org: string) => kiln.sql<{ commit: string }[]>`
    select e.commit from evaluations e join tasks k on k.id = e.task_id join projects p on p.id = k.project_id join organizations o on o.id = p.organization_id
    where o.name = ${org} and e.trigger = 'poll'`;
  const scopedTokens = () => [...host.tokens.entries()].filter(([, issued]) => issued.repositoryIds !== null);

  await t.test('without .kiln-projects no project is linked: no token, the host refuses every listing', async (t) => {
    await eventually(() => host.gitRequests.filter((r) => r.token === null).length >= 4, { message: 'both projects polled twice' });
    t.same(scopedTokens(), [], 'no repository token was issued');
    t.ok(host.gitRequests.every((r) => !r.allowed), 'all refused');
    t.equal(await heads('acme'), null, 'no head recorded');
  });

  await t.test('.kiln-projects naming acme/secret: its polls list the branches with a scoped read token; a new commit is evaluated', async (t) => {
    const linkCommit = commitFile(source.dir, '.kiln-projects', 'acme/secret\n');
    host.hostRepository('acme/secret', REPOSITORY_ID, source.dir);
    await eventually(async () => (await heads('acme')) === linkCommit, { message: 'acme records the head' });
    const tokens = scopedTokens();
    t.ok(tokens.length >= 1, 'a repository token was issued');
    for (const [, issued] of tokens) t.same(issued, { installation: INSTALLATION, repositoryIds: [REPOSITORY_ID], permissions: { contents: 'read' } }, 'scoped to the one repository, contents read only');
    t.ok(host.gitRequests.some((r) => r.allowed && tokens.some(([token]) => token === r.token)), 'the listing came with it');

    const next = commitFile(source.dir, 'README', 'new\n');
    host.hostRepository('acme/secret', REPOSITORY_ID, source.dir);
    const evaluated = await eventually(async () => {
      const rows = await polledEvaluations('acme');
      return rows.length > 0 ? rows : null;
    }, { message: 'the moved head is evaluated' });
    t.same(evaluated.map((r) => r.commit), [next], 'the new commit, once');
    t.equal(await heads('mal'), null, 'mal/secret (not named) still lists nothing');
    t.same(await polledEvaluations('mal'), []);
    t.ok(host.gitRequests.filter((r) => r.token === null).every((r) => !r.allowed), 'its listings come without a token and are refused');

    const secrets = [...host.tokens.keys()];
    const rows = JSON.stringify(await kiln.sql`select * from evaluations`) + JSON.stringify(await kiln.sql`select * from projects`)
      + JSON.stringify(await kiln.sql`select * from project_polled_heads`) + JSON.stringify(await kiln.sql`select * from project_git_host_links`);
    t.notOk(secrets.some((s) => rows.includes(s)), 'no token in a row');
    t.ok(logged.length > 0, 'kiln logged');
    t.notOk(secrets.some((s) => logged.join('').includes(s)), 'no token in kiln\'s log');
  });
});
