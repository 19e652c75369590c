// End to end with real Nix: a push webhook from the loopback Git host starts an evaluation that a
// real local worker evaluates and builds; the check run goes queued → in progress → completed,
// success for a flake that builds, failure with the failed build's first log lines for one that
// does not, each with the evaluation page under frontend.url. A newer push to the branch while a
// build of the older commit runs aborts that evaluation: the worker kills the build, the old check
// run ends cancelled and the newer commit is built. A fork's pull request for a project with
// requires_approval waits (reported queued) until a member approves, then runs; closing a pull
// request while its build runs has the worker kill the build, and its check run ends cancelled.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { startTestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { createFlakeRepo, shellFlake } from '../../support/flakeRepo.js';
import { examplePayload, gitHostOptions, pointAt, sendHook, startTestGitHost } from '../../support/gitHost.js';
import { requireNix } from '../../support/nixStore.js';
import { spawnWorker } from '../../support/workerProcess.js';
import { eventually } from '../../support/eventually.js';

requireNix();

const FRONTEND = 'https://ci.example.test';
const TIMEOUT = Number(process.env['KILN_FLOW_TIMEOUT'] ?? 120_000);

t.test('push → evaluation on a real worker → check run success or failure', { timeout: TIMEOUT }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-githost-flow-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const host = await startTestGitHost(dir);
  t.teardown(() => host.close());
  const kiln = await startTestKiln(t, {
    localWorker: true, 'build.retryBackoffSecs': 0,
    ...gitHostOptions(host), 'frontend.url': FRONTEND,
  }, { gitHostRetryBaseMs: 20 });
  const nonce = randomBytes(8).toString('hex');
  const good = createFlakeRepo(join(dir, 'good'), { 'flake.nix': shellFlake(nonce, '      hello = mk "kiln-gh-hello" "echo hi; mkdir $out";') });
  const bad = createFlakeRepo(join(dir, 'bad'), { 'flake.nix': shellFlake(nonce, '      broken = mk "kiln-gh-broken" "echo first line of the failure; echo second line; exit 3";') });
  const { token } = await signUp(kiln, 'ada');
  await kiln.api('PUT', '/orgs', { token, body: { name: 'acme' } });
  const cache = await createTestCache(kiln.sql, 'main', { public: true });
  for (const [name, repo] of [['good', good], ['bad', bad]] as const) {
    const made = await kiln.api('PUT', '/projects/acme', { token, body: { name, repository: repo.url, wildcard: 'packages.x86_64-linux.*' } });
    t.equal(made.status, 200, String(made.message));
    await kiln.sql`insert into subscriptions (project_id, cache_id, mode) select id, ${cache.id}, 0 from projects where name = ${name}`;
  }

  const pushTo = async (name: string, repo: { url: string; commit: string }) => {
    const payload = pointAt(examplePayload('push'), host, `acme/${name}`, repo.url, 77);
    Object.assign(payload, { ref: 'refs/heads/main', after: repo.commit, deleted: false });
    const sent = await sendHook(kiln.url, 'push', payload, { secret: host.secret });
    t.equal(sent.status, 200, JSON.stringify(sent.json));
    return (sent.json.message as { evaluations: string[] }).evaluations[0]!;
  };
  const finished = (id: string) => eventually(
    () => host.calls.find((c) => c.body['external_id'] === id && c.body['status'] === 'completed'),
    { timeout: 0.75 * TIMEOUT, interval: 200, message: `the check run of ${id} completes` },
  );

  t.teardown(async () => {
    if (!process.env['KILN_FLOW_DEBUG']) return;
    console.error(JSON.stringify(host.calls.map((c) => [c.method, c.path, c.body['status'], c.body['conclusion']])));
    console.error(JSON.stringify(await kiln.sql`select e.id, e.phase, e.error, r.reported_phase, r.last_error, r.attempts from evaluations e left join git_host_reports r on r.evaluation_id = e.id`));
  });
  const worker = spawnWorker({ serverUrl: `ws://127.0.0.1:${kiln.port}/proto`, baseDir: join(dir, 'worker') });
  t.teardown(() => worker.stop());
  const goodId = await pushTo('good', good);
  const badId = await pushTo('bad', bad);
  const success = await finished(goodId);
  t.match(success.body, { conclusion: 'success', details_url: `${FRONTEND}/evals/${goodId}` });
  t.match((success.body['output'] as { summary: string }).summary, /packages\.x86_64-linux\.hello/, 'the summary lists the entry points');
  const statuses = host.calls.filter((c) => c.body['external_id'] === goodId).map((c) => c.body['status']);
  t.equal(statuses[0], 'queued', 'created queued');
  t.ok(statuses.includes('in_progress'), 'then in progress');
  t.equal(statuses.at(-1), 'completed');
  t.equal(statuses.indexOf('completed'), statuses.length - 1, 'nothing after completed');

  const failure = await finished(badId);
  t.match(failure.body, { conclusion: 'failure', details_url: `${FRONTEND}/evals/${badId}` });
  const summary = (failure.body['output'] as { summary: string }).summary;
  t.match(summary, /kiln-gh-broken failed/, 'the failed build is named');
  t.match(summary, /first line of the failure\nsecond line/, 'with its first log lines');
});

t.test('a newer push aborts the running evaluation of the older commit', { timeout: TIMEOUT }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-githost-supersede-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const host = await startTestGitHost(dir);
  t.teardown(() => host.close());
  const kiln = await startTestKiln(t, { localWorker: true, 'build.retryBackoffSecs': 0, ...gitHostOptions(host), 'frontend.url': FRONTEND }, { gitHostRetryBaseMs: 20 });
  const nonce = randomBytes(8).toString('hex');
  // the older commit's build runs until something kills it
  const repo = createFlakeRepo(join(dir, 'app'), { 'flake.nix': shellFlake(nonce, '      hello = mk "kiln-gh-stuck" "echo stuck starts; sleep 3600; mkdir $out";') });
  const { token } = await signUp(kiln, 'ada');
  await kiln.api('PUT', '/orgs', { token, body: { name: 'acme' } });
  const cache = await createTestCache(kiln.sql, 'main', { public: true });
  t.equal((await kiln.api('PUT', '/projects/acme', { token, body: { name: 'app', repository: repo.url, wildcard: 'packages.x86_64-linux.*' } })).status, 200);
  await kiln.sql`insert into subscriptions (project_id, cache_id, mode) select id, ${cache.id}, 0 from projects where name = 'app'`;
  const worker = spawnWorker({ serverUrl: `ws://127.0.0.1:${kiln.port}/proto`, baseDir: join(dir, 'worker') });
  t.teardown(() => worker.stop());
  const pushTo = async (commit: string) => {
    const payload = pointAt(examplePayload('push'), host, 'acme/app', repo.url, 78);
    Object.assign(payload, { ref: 'refs/heads/main', after: commit, deleted: false });
    const sent = await sendHook(kiln.url, 'push', payload, { secret: host.secret });
    t.equal(sent.status, 200, JSON.stringify(sent.json));
    return (sent.json.message as { evaluations: string[] }).evaluations[0]!;
  };

  const older = await pushTo(repo.commit);
  const [started] = await eventually(() => kiln.sql<{ id: string }[]>`
    select db.id from builds b join derivation_builds db on db.id = b.derivation_build_id where b.evaluation_id = ${older} and db.status = 'started'`,
  { timeout: 0.5 * TIMEOUT, interval: 200, until: (rows) => rows.length === 1, message: 'the stuck build runs' });

  writeFileSync(join(repo.dir, 'flake.nix'), shellFlake(nonce, '      hello = mk "kiln-gh-quick" "echo quick; mkdir $out";'));
  const git = (args: string[]) => execFileSync('git', ['-C', repo.dir, '-c', 'user.email=t@kiln.invalid', '-c', 'user.name=t', ...args], { encoding: 'utf8' }).trim();
  git(['commit', '--quiet', '-am', 'quick']);
  const newer = await pushTo(git(['rev-parse', 'HEAD']));

  const [old] = await kiln.sql<{ phase: string; error: string }[]>`select phase, error from evaluations where id = ${older}`;
  t.equal(old!.phase, 'aborted', 'the older evaluation is aborted at once');
  t.match(old!.error, `superseded by evaluation ${newer}`);
  const killed = await worker.waitForLog((line) => line.msg === 'build failed' && String(line['drvPath']).includes('kiln-gh-stuck'));
  t.equal(killed['reason'], 'cancelled', 'the worker killed the running build');
  const [build] = await kiln.sql<{ status: string }[]>`select status from derivation_builds where id = ${started!.id}`;
  t.equal(build!.status, 'aborted');
  const cancelled = await eventually(() => host.calls.find((c) => c.body['external_id'] === older && c.body['status'] === 'completed'), { timeout: 0.5 * TIMEOUT, interval: 200, message: 'the old check run completes' });
  t.equal(cancelled.body['conclusion'], 'cancelled');
  const success = await eventually(() => host.calls.find((c) => c.body['external_id'] === newer && c.body['status'] === 'completed'), { timeout: 0.5 * TIMEOUT, interval: 200, message: 'the new check run completes' });
  t.equal(success.body['conclusion'], 'success', 'the newer commit is built');
});

t.test('a fork\'s pull request waits for approval, then runs; closing a pull request kills its running build', { timeout: TIMEOUT }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-githost-pr-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const host = await startTestGitHost(dir);
  t.teardown(() => host.close());
  const kiln = await startTestKiln(t, { localWorker: true, 'build.retryBackoffSecs': 0, ...gitHostOptions(host), 'frontend.url': FRONTEND }, { gitHostRetryBaseMs: 20 });
  const nonce = randomBytes(8).toString('hex');
  const forked = createFlakeRepo(join(dir, 'forked'), { 'flake.nix': shellFlake(nonce, '      hello = mk "kiln-gh-fork" "echo fork; mkdir $out";') });
  const stuck = createFlakeRepo(join(dir, 'stuck'), { 'flake.nix': shellFlake(nonce, '      hello = mk "kiln-gh-pr-stuck" "echo stuck starts; sleep 3600; mkdir $out";') });
  const { token } = await signUp(kiln, 'ada');
  await kiln.api('PUT', '/orgs', { token, body: { name: 'acme' } });
  const cache = await createTestCache(kiln.sql, 'main', { public: true });
  for (const [name, repo, approval] of [['forked', forked, true], ['stuck', stuck, false]] as const) {
    const made = await kiln.api('PUT', '/projects/acme', { token, body: { name, repository: repo.url, wildcard: 'packages.x86_64-linux.*', requires_approval: approval } });
    t.equal(made.status, 200, JSON.stringify(made.message));
    await kiln.sql`insert into subscriptions (project_id, cache_id, mode) select id, ${cache.id}, 0 from projects where name = ${name}`;
  }
  const worker = spawnWorker({ serverUrl: `ws://127.0.0.1:${kiln.port}/proto`, baseDir: join(dir, 'worker') });
  t.teardown(() => worker.stop());
  const pullRequest = async (name: string, url: string, head: string, action: string, fork: boolean): Promise<string[]> => {
    const payload = pointAt(examplePayload('pull_request', action), host, `acme/${name}`, url, 79);
    const pull = payload['pull_request'] as { head: { sha: string; repo: { id: number } }; base: { ref: string } };
    pull.head.sha = head;
    pull.base.ref = 'main';
    pull.head.repo = { ...pull.head.repo, id: fork ? 999_777 : (payload['repository'] as { id: number }).id };
    payload['number'] = 5;
    const sent = await sendHook(kiln.url, 'pull_request', payload, { secret: host.secret });
    t.equal(sent.status, 200, JSON.stringify(sent.json));
    return (sent.json.message as { evaluations: string[] }).evaluations;
  };

  const [parked] = await pullRequest('forked', forked.url, forked.commit, 'opened', true);
  const queued = await eventually(() => host.calls.find((c) => c.body['external_id'] === parked && c.method === 'POST'), { timeout: 0.25 * TIMEOUT, interval: 200, message: 'the check run is created' });
  t.equal(queued.body['status'], 'queued', 'reported queued while it waits');
  const [waiting] = await kiln.sql<{ phase: string }[]>`select phase from evaluations where id = ${parked!}`;
  t.equal(waiting!.phase, 'waiting', 'parked: the worker does not get it');
  const approved = await kiln.api('POST', `/evals/${parked!}`, { token, body: { method: 'approve' } });
  t.equal(approved.status, 200, JSON.stringify(approved.message));
  const success = await eventually(() => host.calls.find((c) => c.body['external_id'] === parked && c.body['status'] === 'completed'), { timeout: 0.5 * TIMEOUT, interval: 200, message: 'the approved evaluation completes' });
  t.equal(success.body['conclusion'], 'success', 'approved, it runs on the worker and succeeds');

  const [running] = await pullRequest('stuck', stuck.url, stuck.commit, 'opened', false);
  const [started] = await eventually(() => kiln.sql<{ id: string }[]>`
    select db.id from builds b join derivation_builds db on db.id = b.derivation_build_id where b.evaluation_id = ${running!} and db.status = 'started'`,
  { timeout: 0.5 * TIMEOUT, interval: 200, until: (rows) => rows.length === 1, message: 'the pull request\'s build runs' });
  t.same(await pullRequest('stuck', stuck.url, stuck.commit, 'closed', false), [], 'closing starts nothing');
  const [closed] = await kiln.sql<{ phase: string; error: string }[]>`select phase, error from evaluations where id = ${running!}`;
  t.match(closed, { phase: 'aborted', error: 'pull request #5 was closed' });
  const killed = await worker.waitForLog((line) => line.msg === 'build failed' && String(line['drvPath']).includes('kiln-gh-pr-stuck'));
  t.equal(killed['reason'], 'cancelled', 'the worker killed the running build');
  const [build] = await kiln.sql<{ status: string }[]>`select status from derivation_builds where id = ${started!.id}`;
  t.equal(build!.status, 'aborted');
  const cancelled = await eventually(() => host.calls.find((c) => c.body['external_id'] === running && c.body['status'] === 'completed'), { timeout: 0.5 * TIMEOUT, interval: 200, message: 'its check run completes' });
  t.equal(cancelled.body['conclusion'], 'cancelled');
});
