// open_pr runs that fail are tried again, and whose identity their commits carry (docs/git-hosts.md
// "open_pr"), with real Nix, real git and a `kiln worker` process against the loopback Git host, on
// a clock that moves only when the test steps it:
// - with pullRequests.commitName/commitEmail and the action's author null, the commit is the app's
//   bot user's (GET /app for the slug, GET /users/<slug>[bot] for the id, asked once);
// - the host answers the pull request's creation 500, then 429 with Retry-After: the run waits
//   its backoff (not a millisecond less), then the host's Retry-After, is tried again without
//   pushing again, and opens exactly one pull request; the action's view shows each state;
// - an action's own author is the commit's;
// - a run the host keeps refusing is given up after its bounded attempts, reported dead.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { startTestKiln } from '../../support/kiln.js';
import { steppedClock } from '../../support/clock.js';
import { createFlakeRepo, shellFlake } from '../../support/flakeRepo.js';
import { examplePayload, gitHostOptions, installationPayload, openPrProject, pointAt, sendHook, startTestGitHost } from '../../support/gitHost.js';
import { requireNix } from '../../support/nixStore.js';
import { spawnWorker } from '../../support/workerProcess.js';
import { eventually } from '../../support/eventually.js';
import { MAX_OPEN_PR_ATTEMPTS } from '../../../services/gitHosts/openPrRuns.js';

requireNix();

const TIMEOUT = Number(process.env['KILN_FLOW_TIMEOUT'] ?? 280_000);
const INSTALLATION = 9003;
const REPOSITORY_ID = 5252;
/** the runner's default first retry delay */
const BASE_MS = 30_000;

interface RunRow { id: string; status: string; attempts: number; pushed: string | null; pull_request: number | null; error: string | null; next_attempt_at: Date | null }

t.test('open_pr: the bot identity by default, retries with backoff after 500 and 429, one pull request, bounded attempts', { timeout: TIMEOUT }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-open-pr-retry-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const host = await startTestGitHost(dir);
  t.teardown(() => host.close());
  const clock = steppedClock(new Date());
  // no pullRequests.commitName / commitEmail: the host's default, the app's bot user
  const kiln = await startTestKiln(t, { localWorker: true, 'build.retryBackoffSecs': 0, ...gitHostOptions(host) }, { clock, gitHostRetryBaseMs: 20 });

  const nonce = randomBytes(8).toString('hex');
  const source = createFlakeRepo(join(dir, 'app'), {
    'flake.nix': shellFlake(nonce, '      hello = mk "kiln-open-pr-retry" "echo hi; mkdir $out";'),
    '.kiln-projects': 'acme/app\n',
    'version': 'v1\n',
  });
  host.hostRepository('acme/app', REPOSITORY_ID, source.dir);
  const url = `${host.url}/acme/app.git`;
  const hostedGit = (...args: string[]) => execFileSync('git', ['-C', join(dir, 'hosted', 'acme/app.git'), ...args], { encoding: 'utf8' }).trim();
  const git = (args: string[]) => execFileSync('git', ['-C', source.dir, '-c', 'user.email=t@kiln.invalid', '-c', 'user.name=t', ...args], { encoding: 'utf8' }).trim();

  t.equal((await sendHook(kiln.url, 'installation', installationPayload(INSTALLATION, REPOSITORY_ID, 'acme/app'), { secret: host.secret })).status, 200);

  const { token, action } = await openPrProject<{ id: string; last_run: unknown }>(t, kiln, url);
  t.equal(action.status, 200, JSON.stringify(action.message));
  t.equal(action.message.last_run, null, 'no run yet');

  const worker = spawnWorker({ serverUrl: `ws://127.0.0.1:${kiln.port}/proto`, baseDir: join(dir, 'worker') });
  t.teardown(() => worker.stop());
  t.teardown(async () => {
    if (!process.env['KILN_FLOW_DEBUG']) return;
    console.error(JSON.stringify(await kiln.sql`select e.id, e.phase, e.error from evaluations e`), JSON.stringify(await kiln.sql`select * from open_pr_runs`));
  });

  const push = async (commit: string) => {
    const payload = pointAt(examplePayload('push'), host, 'acme/app', url, INSTALLATION);
    Object.assign(payload, { ref: 'refs/heads/main', after: commit, deleted: false });
    const sent = await sendHook(kiln.url, 'push', payload, { secret: host.secret });
    t.equal(sent.status, 200, JSON.stringify(sent.json));
    return (sent.json.message as { evaluations: string[] }).evaluations[0]!;
  };
  const newCommit = (version: string) => {
    writeFileSync(join(source.dir, 'version'), `${version}\n`);
    git(['commit', '--quiet', '-am', version]);
    host.hostRepository('acme/app', REPOSITORY_ID, source.dir);
    return git(['rev-parse', 'HEAD']);
  };
  const runOf = async (evaluation: string) => (await kiln.sql<RunRow[]>`
    select id, status, attempts, pushed, pull_request, error, next_attempt_at from open_pr_runs where evaluation_id = ${evaluation}`)[0] ?? null;
  /** the run after its try `attempt` ended (a try in progress is 'running') */
  const settled = (evaluation: string, attempt: number) => eventually(async () => {
    const run = await runOf(evaluation);
    return run && run.status !== 'running' && run.attempts === attempt ? run : null;
  }, { timeout: 0.5 * TIMEOUT, interval: 200, message: `try ${attempt} of the open_pr run after ${evaluation} ends` });
  const updates = async (runId: string) => {
    const events = await kiln.sql<{ body: string }[]>`select body from event_outbox where event = 'task.action.update'`;
    return events.map((e) => (JSON.parse(e.body) as { content: Record<string, unknown> }).content).filter((c) => c['delivery_id'] === runId)
      .sort((a, b) => Number(a['attempt']) - Number(b['attempt']));
  };
  const lastRun = async () => (await kiln.api<{ last_run: Record<string, unknown> | null }>('GET', `/tasks/app/default/actions/${action.message.id}`, { token })).message.last_run;
  const pushes = () => host.gitRequests.filter((r) => r.push && r.allowed && r.path.endsWith('/git-receive-pack')).length;
  /** steps the clock to 1 ms before the run is due: not tried; then to when it is due: tried */
  const dueAndTried = async (evaluation: string, run: RunRow, what: string) => {
    clock.step(run.next_attempt_at!.getTime() - clock.now().getTime() - 1);
    await kiln.openPrs!.passNow();
    t.match(await runOf(evaluation), { status: 'retrying', attempts: run.attempts }, `1 ms before ${what}, the run is not tried`);
    clock.step(1);
    await kiln.openPrs!.passNow();
  };

  // The host fails the pull request's creation twice: 500, then 429 asking for 120 s.
  host.failNext(/^POST \/repos\/acme\/app\/pulls$/, [{ status: 500 }, { status: 429, headers: { 'retry-after': '120' } }]);
  const first = await push(source.commit);
  const failedOnce = await settled(first, 1);
  t.match(failedOnce, { status: 'retrying', pull_request: null, pushed: /^[0-9a-f]{40}$/, error: /500/ }, 'the first try pushed, then the host answered 500');
  t.equal(failedOnce.next_attempt_at!.getTime() - clock.now().getTime(), BASE_MS, 'the next try waits the first backoff');
  t.equal(host.branchHead('acme/app', 'kiln/default'), failedOnce.pushed);
  const bot = `${host.appSlug}[bot]`;
  t.equal(hostedGit('log', '-1', '--format=%an <%ae>|%cn <%ce>|%P', 'kiln/default'),
    `${bot} <${host.botUserId}+${bot}@users.noreply.127.0.0.1>|${bot} <${host.botUserId}+${bot}@users.noreply.127.0.0.1>|${source.commit}`,
    'with no author configured, the app\'s bot user is the author and committer');
  t.match(await lastRun(), { status: 'retrying', attempts: 1, evaluation_id: first, error: /500/, pull_request: null }, 'the action view shows the run waiting');
  t.match(await updates(failedOnce.id), [{ status: 'retrying', attempt: 1, outcome: 'failed', error: /500/ }]);
  const pushesBefore = pushes();

  await dueAndTried(first, failedOnce, 'the first backoff');
  const limited = await settled(first, 2);
  t.match(limited, { status: 'retrying', error: /429/ }, 'the second try met the 429');
  t.equal(limited.next_attempt_at!.getTime() - clock.now().getTime(), 120_000, 'the host\'s Retry-After (120 s) outweighs the 60 s backoff');

  await dueAndTried(first, limited, 'the Retry-After');
  const opened = await settled(first, 3);
  t.match(opened, { status: 'opened', pull_request: 1, error: null, pushed: failedOnce.pushed }, 'the third try opened the pull request');
  t.equal(pushes(), pushesBefore, 'the retries did not push again: the branch was pushed already');
  t.equal(host.pullRequests.length, 1, 'one pull request');
  t.match(host.pullRequests, [{ number: 1, head: 'kiln/default', base: 'main', state: 'open' }]);
  t.equal(host.calls.filter((c) => c.method === 'POST' && c.path === '/repos/acme/app/pulls').length, 3, 'three creations asked, two refused');
  t.match(await updates(opened.id), [{ status: 'retrying', attempt: 1 }, { status: 'retrying', attempt: 2 }, { status: 'delivered', attempt: 3, outcome: 'opened', pull_request: 1 }]);
  t.match(await lastRun(), { status: 'opened', attempts: 3, pull_request: 1, pull_request_url: `${host.url}/acme/app/pull/1`, error: null, next_attempt_at: null });

  // The action's own author: the next commit is theirs; the same pull request is updated.
  t.equal((await kiln.api('PATCH', `/tasks/app/default/actions/${action.message.id}`, { token, body: { commit_name: 'Release Bot', commit_email: 'release@acme.invalid' } })).status, 200);
  const second = await push(newCommit('v2'));
  t.match(await settled(second, 1), { status: 'updated', pull_request: 1 });
  t.equal(hostedGit('log', '-1', '--format=%an <%ae>|%cn <%ce>', 'kiln/default'), 'Release Bot <release@acme.invalid>|Release Bot <release@acme.invalid>', 'the configured author and committer');
  t.equal(host.pullRequests.length, 1, 'still one pull request');
  t.equal(host.calls.filter((c) => c.method === 'GET' && c.path === '/app').length, 1, 'the bot identity was asked once');

  // A host that keeps failing: the run is given up after its bounded attempts.
  host.failNext(/^GET \/repos\/acme\/app\/pulls$/, Array.from({ length: MAX_OPEN_PR_ATTEMPTS }, () => ({ status: 502 })));
  const third = await push(newCommit('v3'));
  let run = await settled(third, 1);
  for (let attempt = 2; attempt <= MAX_OPEN_PR_ATTEMPTS; attempt += 1) {
    t.equal(run.status, 'retrying', `try ${attempt - 1} failed and is tried again`);
    t.equal(run.next_attempt_at!.getTime() - clock.now().getTime(), BASE_MS * 2 ** (attempt - 2), `after try ${attempt - 1} the wait doubles`);
    await dueAndTried(third, run, `try ${attempt}`);
    run = await settled(third, attempt);
  }
  t.match(run, { status: 'failed', attempts: MAX_OPEN_PR_ATTEMPTS, next_attempt_at: null, error: /502/ }, 'given up');
  t.match((await updates(run.id)).at(-1), { status: 'dead', attempt: MAX_OPEN_PR_ATTEMPTS, outcome: 'failed' });
  t.match(await lastRun(), { status: 'failed', attempts: MAX_OPEN_PR_ATTEMPTS, evaluation_id: third });
  clock.step(24 * 3600_000);
  await kiln.openPrs!.passNow();
  t.match(await runOf(third), { status: 'failed', attempts: MAX_OPEN_PR_ATTEMPTS }, 'and not tried again');
  t.equal(host.pullRequests.length, 1, 'still one pull request');
});
