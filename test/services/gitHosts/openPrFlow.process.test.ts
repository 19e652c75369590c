// The open_pr task action end to end (docs/git-hosts.md "open_pr"), with real Nix, real git and a
// `kiln worker` process against the loopback Git host: a push to main of a linked private
// repository is evaluated and succeeds, then kiln mints a read and a write token, the worker runs
// the action's command in a clone of the evaluated commit and force-pushes kiln/default, and the
// server opens the pull request into main, reported as task.action.update; a second push's
// evaluation updates the same pull request; a failing command is reported dead with its stderr
// and moves nothing; a project the application is not linked to fails its run so. Each run is a
// row of open_pr_runs.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { startTestKiln } from '../../support/kiln.js';
import { createFlakeRepo, shellFlake } from '../../support/flakeRepo.js';
import { examplePayload, gitHostOptions, installationPayload, openPrProject, pointAt, sendHook, startTestGitHost } from '../../support/gitHost.js';
import { requireNix } from '../../support/nixStore.js';
import { spawnWorker } from '../../support/workerProcess.js';
import { eventually } from '../../support/eventually.js';

requireNix();

const TIMEOUT = Number(process.env['KILN_FLOW_TIMEOUT'] ?? 180_000);
const FRONTEND = 'https://ci.example.test';
const INSTALLATION = 9002;
const REPOSITORY_ID = 5151;

t.test('a successful evaluation runs the open_pr action: branch pushed, pull request opened, then updated', { timeout: TIMEOUT }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-open-pr-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const host = await startTestGitHost(dir);
  t.teardown(() => host.close());
  const kiln = await startTestKiln(t, {
    localWorker: true, 'build.retryBackoffSecs': 0, ...gitHostOptions(host), 'frontend.url': FRONTEND,
    'pullRequests.commitName': 'Kiln Bot', 'pullRequests.commitEmail': 'bot@kiln.invalid',
  }, { gitHostRetryBaseMs: 20 });

  const nonce = randomBytes(8).toString('hex');
  const source = createFlakeRepo(join(dir, 'app'), {
    'flake.nix': shellFlake(nonce, '      hello = mk "kiln-open-pr-hello" "echo hi; mkdir $out";'),
    '.kiln-projects': 'acme/app\n',
    'version': 'v1\n',
  });
  host.hostRepository('acme/app', REPOSITORY_ID, source.dir);
  const url = `${host.url}/acme/app.git`;
  const hostedGit = (...args: string[]) => execFileSync('git', ['-C', join(dir, 'hosted', 'acme/app.git'), ...args], { encoding: 'utf8' }).trim();

  t.equal((await sendHook(kiln.url, 'installation', installationPayload(INSTALLATION, REPOSITORY_ID, 'acme/app'), { secret: host.secret })).status, 200);

  const { token, cache, action } = await openPrProject<{ id: string; branch: string }>(t, kiln, url);
  t.equal(action.status, 200, JSON.stringify(action.message));
  t.equal(action.message.branch, 'kiln/default');

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
  // an action with the evaluated branch as its own: refused, main never force-pushed
  const onMain = await kiln.api<{ id: string }>('PUT', '/tasks/app/default/actions', { token, body: { kind: 'open_pr', name: 'on main', command: ['sh', '-c', 'echo x > version'], branch: 'main' } });
  t.equal(onMain.status, 200);
  const run = (evaluation: string, actionId = action.message.id) => eventually(async () => {
    const [row] = await kiln.sql<{ id: string; status: string; pushed: string | null; pull_request: number | null; url: string | null; error: string | null }[]>`
      select id, status, pushed, pull_request, url, error from open_pr_runs
      where evaluation_id = ${evaluation} and task_action_id = ${actionId} and status not in ('running', 'retrying')`;
    return row ?? null;
  }, { timeout: 0.45 * TIMEOUT, interval: 200, message: `the open_pr run after ${evaluation} ends` });
  const update = async (runId: string) => {
    const events = await kiln.sql<{ body: string }[]>`select body from event_outbox where event = 'task.action.update'`;
    const contents = events.map((e) => (JSON.parse(e.body) as { content: Record<string, unknown> }).content);
    return contents.find((c) => c['delivery_id'] === runId) ?? null;
  };

  const first = await push(source.commit);
  const opened = await run(first);
  t.match(opened, { status: 'opened', pull_request: 1, pushed: /^[0-9a-f]{40}$/ }, opened.error ?? '');
  const [evaluation] = await kiln.sql<{ phase: string }[]>`select phase from evaluations where id = ${first}`;
  t.equal(evaluation!.phase, 'completed', 'after the evaluation succeeded');
  t.equal(host.branchHead('acme/app', 'kiln/default'), opened.pushed, 'the branch is at the commit the worker pushed');
  t.equal(hostedGit('log', '-1', '--format=%an <%ae>|%P', 'kiln/default'), `Kiln Bot <bot@kiln.invalid>|${source.commit}`, 'by pullRequests.commitName/Email, on the evaluated commit');
  t.equal(hostedGit('show', 'kiln/default:version'), 'bumped from v1');
  t.match(host.pullRequests, [{ number: 1, head: 'kiln/default', base: 'main', state: 'open' }], 'the pull request into the evaluated branch');
  const scoped = [...host.tokens.values()].filter((issued) => issued.repositoryIds !== null);
  t.ok(scoped.some((i) => i.permissions?.['contents'] === 'write'), 'a write token was minted for the repository');
  t.ok(scoped.some((i) => i.permissions?.['contents'] === 'read'), 'and a read token');
  t.match(await update(opened.id), { kind: 'open_pr', status: 'delivered', outcome: 'opened', evaluation_id: first, pull_request: 1, pull_request_url: opened.url, pushed: opened.pushed });
  t.match(await run(first, onMain.message.id), { status: 'failed', error: /"main" is a branch the project evaluates/ });
  t.equal(host.branchHead('acme/app', 'main'), source.commit, 'main was not force-pushed');
  t.equal((await kiln.api('DELETE', `/tasks/app/default/actions/${onMain.message.id}`, { token })).status, 200);

  // A second push: its evaluation updates the same pull request.
  writeFileSync(join(source.dir, 'version'), 'v2\n');
  const git = (args: string[]) => execFileSync('git', ['-C', source.dir, '-c', 'user.email=t@kiln.invalid', '-c', 'user.name=t', ...args], { encoding: 'utf8' }).trim();
  git(['commit', '--quiet', '-am', 'v2']);
  const second = git(['rev-parse', 'HEAD']);
  host.hostRepository('acme/app', REPOSITORY_ID, source.dir);
  const next = await push(second);
  const updated = await run(next);
  t.match(updated, { status: 'updated', pull_request: 1 }, updated.error ?? '');
  t.equal(hostedGit('show', 'kiln/default:version'), 'bumped from v2', 'the branch carries the new change');
  t.equal(hostedGit('rev-parse', 'kiln/default^'), second, 'force-pushed onto the newer commit');
  t.equal(host.pullRequests.length, 1, 'still one pull request');
  t.match(await update(updated.id), { status: 'delivered', outcome: 'updated', pull_request: 1 });

  // A command that fails: the run fails with its stderr, the branch and the pull request stay.
  t.equal((await kiln.api('PATCH', `/tasks/app/default/actions/${action.message.id}`, { token, body: { command: ['sh', '-c', 'echo no network >&2; exit 3'] } })).status, 200);
  writeFileSync(join(source.dir, 'version'), 'v3\n');
  git(['commit', '--quiet', '-am', 'v3']);
  host.hostRepository('acme/app', REPOSITORY_ID, source.dir);
  const before = host.branchHead('acme/app', 'kiln/default');
  const third = await push(git(['rev-parse', 'HEAD']));
  const failed = await run(third);
  t.match(failed, { status: 'failed', pull_request: null, error: /exit 3.*no network/s });
  t.match(await update(failed.id), { status: 'dead', outcome: 'failed', error: /no network/ });
  t.equal(host.branchHead('acme/app', 'kiln/default'), before, 'the branch did not move');
  t.match(host.pullRequests, [{ number: 1, state: 'open' }], 'the pull request is left as it was');

  // A project the application is not linked to (a repository outside the host): its run fails so.
  const local = createFlakeRepo(join(dir, 'local'), { 'flake.nix': shellFlake(nonce, '      hello = mk "kiln-open-pr-local" "echo hi; mkdir $out";') });
  t.equal((await kiln.api('PUT', '/projects/acme', { token, body: { name: 'local', repository: local.url, wildcard: 'packages.x86_64-linux.*' } })).status, 200);
  await kiln.sql`insert into subscriptions (project_id, cache_id, mode) select id, ${cache.id}, 0 from projects where name = 'local'`;
  const localAction = await kiln.api<{ id: string }>('PUT', '/tasks/local/default/actions', { token, body: { kind: 'open_pr', name: 'bump', command: ['true'] } });
  t.equal(localAction.status, 200);
  const payload = pointAt(examplePayload('push'), host, 'acme/local', local.url, INSTALLATION);
  Object.assign(payload, { ref: 'refs/heads/main', after: local.commit, deleted: false });
  const sent = await sendHook(kiln.url, 'push', payload, { secret: host.secret });
  const unlinked = await run((sent.json.message as { evaluations: string[] }).evaluations[0]!, localAction.message.id);
  t.match(unlinked, { status: 'failed', error: /not linked to the Git host application/ });
  t.match(await update(unlinked.id), { status: 'dead', outcome: 'failed' });
});
