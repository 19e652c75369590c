// Superseded evaluations (docs/git-hosts.md): a push, poll or pull request event bringing a newer
// commit of a branch or pull request aborts the open evaluations of the older one for the same
// task, reported cancelled on the old commit; other branches, other pull requests, manual
// evaluations, the same commit again and projects with cancel_superseded off are left alone.
// Also the project's requires_approval (fork pull requests parked for every task). Real kiln serve,
// real webhooks from captured payloads; no worker (the running case is in gitHostFlow.process.test.ts).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { startTestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createFlakeRepo, shellFlake } from '../../support/flakeRepo.js';
import { examplePayload, gitHostOptions, pointAt, sendHook, startTestGitHost } from '../../support/gitHost.js';
import { eventually } from '../../support/eventually.js';

const INSTALLATION = 4711;
const sha = () => randomBytes(20).toString('hex');

t.test('superseded evaluations', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-superseded-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const host = await startTestGitHost(dir);
  t.teardown(() => host.close());
  const kiln = await startTestKiln(t, { ...gitHostOptions(host) }, { gitHostRetryBaseMs: 20 });
  const repo = createFlakeRepo(join(dir, 'repo'), { 'flake.nix': shellFlake('x', '      hello = mk "hello" "mkdir $out";') });
  const { token } = await signUp(kiln, 'ada');
  await kiln.api('PUT', '/orgs', { token, body: { name: 'acme' } });
  const made = await kiln.api<{ cancel_superseded: boolean; requires_approval: boolean }>('PUT', '/projects/acme', { token, body: { name: 'app', repository: repo.url, wildcard: 'packages.*.*' } });
  t.match(made.message, { cancel_superseded: true, requires_approval: false }, 'on by default; approval per task by default');

  const started = async (event: 'push' | 'pull_request', payload: Record<string, unknown>): Promise<string[]> => {
    const sent = await sendHook(kiln.url, event, payload, { secret: host.secret });
    t.equal(sent.status, 200, JSON.stringify(sent.json));
    return (sent.json.message as { evaluations: string[] }).evaluations;
  };
  const push = (after: string, branch = 'main') => {
    const payload = pointAt(examplePayload('push'), host, 'acme/app', repo.url, INSTALLATION);
    Object.assign(payload, { ref: `refs/heads/${branch}`, after, deleted: false });
    return started('push', payload);
  };
  const pullRequest = (number: number, head: string, action = 'synchronize', forkRepo?: number) => {
    const payload = pointAt(examplePayload('pull_request', action), host, 'acme/app', repo.url, INSTALLATION);
    const pull = payload['pull_request'] as { head: { sha: string; repo: { id: number } }; base: { ref: string } };
    pull.head.sha = head;
    pull.base.ref = 'main';
    if (forkRepo !== undefined) pull.head.repo = { ...pull.head.repo, id: forkRepo };
    payload['number'] = number;
    return started('pull_request', payload);
  };
  const phase = async (id: string) => (await kiln.sql<{ phase: string; error: string | null }[]>`select phase, error from evaluations where id = ${id}`)[0]!;

  await t.test('a newer push to the branch aborts the open evaluation of the older commit', async (t) => {
    const [first] = await push(sha());
    const newerCommit = sha();
    const [second] = await push(newerCommit);
    t.match(await phase(first!), { phase: 'aborted', error: `superseded by evaluation ${second} of commit ${newerCommit.slice(0, 12)}` });
    t.match((await phase(second!)).phase, /^(queued|waiting)$/, 'the newer one goes on');
    const [event] = await kiln.sql`select 1 from event_outbox where event = 'evaluation.aborted' and (body::jsonb)->'content'->>'evaluation_id' = ${first!}`;
    t.ok(event, 'evaluation.aborted is emitted');
    const report = await eventually(() => host.calls.find((c) => c.body['external_id'] === first && c.body['status'] === 'completed'), { message: 'the old check run completes' });
    t.equal(report.body['conclusion'], 'cancelled', 'reported cancelled on the old commit');
  });

  await t.test('other branches, the same commit again, a manual evaluation and another task are left alone', async (t) => {
    const head = sha();
    const [main] = await push(head);
    const [feature] = await push(sha(), 'feature').then(async (ids) => {
      t.same(ids, [], 'no task follows feature yet');
      t.equal((await kiln.api('PUT', '/tasks/app', { token, body: { name: 'feature', branch: 'feature' } })).status, 200);
      return push(sha(), 'feature');
    });
    t.ok(feature, 'the feature task evaluates feature');
    const manual = await kiln.api<{ id: string }>('POST', '/tasks/app/default/evaluate', { token, body: { commit: sha() } });
    t.equal(manual.status, 200, JSON.stringify(manual.message));
    // the same commit again (a force push back, a redelivery under a new id): nothing newer
    await push(head);
    t.match((await phase(main!)).phase, /^(queued|waiting)$/, 'the same commit does not supersede');
    await push(sha(), 'feature');
    t.match((await phase(main!)).phase, /^(queued|waiting)$/, 'a push to another branch does not touch main');
    t.equal((await phase(feature!)).phase, 'aborted', 'but supersedes the feature task\'s own');
    const manualId = typeof manual.message === 'string' ? manual.message : manual.message.id;
    await push(sha());
    t.equal((await phase(main!)).phase, 'aborted');
    const [stillManual] = await kiln.sql<{ phase: string }[]>`select phase from evaluations where trigger = 'manual'`;
    t.match(stillManual?.phase, /^(queued|waiting)$/, `a manual evaluation is never superseded (${manualId})`);
  });

  await t.test('a pull request: a newer head aborts the older head\'s evaluation, not another pull request\'s', async (t) => {
    const [seven] = await pullRequest(7, sha(), 'opened');
    const [eight] = await pullRequest(8, sha(), 'opened');
    const [sevenAgain] = await pullRequest(7, sha());
    t.equal((await phase(seven!)).phase, 'aborted');
    t.match((await phase(eight!)).phase, /^(queued|waiting)$/);
    t.match((await phase(sevenAgain!)).phase, /^(queued|waiting)$/);
  });

  await t.test('a closed or merged pull request: its open evaluations are aborted, reported cancelled; other pull requests go on', async (t) => {
    const [open] = await pullRequest(31, sha(), 'opened');
    const [other] = await pullRequest(32, sha(), 'opened');
    t.same(await pullRequest(31, sha(), 'closed'), [], 'closing starts nothing');
    t.match(await phase(open!), { phase: 'aborted', error: 'pull request #31 was closed' });
    t.match((await phase(other!)).phase, /^(queued|waiting)$/, 'another pull request goes on');
    const [event] = await kiln.sql`select 1 from event_outbox where event = 'evaluation.aborted' and (body::jsonb)->'content'->>'evaluation_id' = ${open!}`;
    t.ok(event, 'evaluation.aborted is emitted');
    const report = await eventually(() => host.calls.find((c) => c.body['external_id'] === open && c.body['status'] === 'completed'), { message: 'the check run completes' });
    t.equal(report.body['conclusion'], 'cancelled', 'reported cancelled');

    const [reopened] = await pullRequest(31, sha(), 'reopened');
    const merged = pointAt(examplePayload('pull_request', 'closed'), host, 'acme/app', repo.url, INSTALLATION);
    Object.assign(merged, { number: 31 });
    Object.assign(merged['pull_request'] as object, { merged: true });
    t.same(await started('pull_request', merged), []);
    t.match(await phase(reopened!), { phase: 'aborted', error: 'pull request #31 was merged' }, 'merged, from the captured closed payload with merged: true');
    t.match((await phase(other!)).phase, /^(queued|waiting)$/);
  });

  await t.test('cancel_superseded: false keeps every evaluation', async (t) => {
    const patched = await kiln.api('PATCH', '/projects/acme/app', { token, body: { cancel_superseded: false } });
    t.match(patched.message, { cancel_superseded: false });
    const [a] = await push(sha());
    const [b] = await push(sha());
    t.match((await phase(a!)).phase, /^(queued|waiting)$/, 'the older one goes on');
    t.match((await phase(b!)).phase, /^(queued|waiting)$/);
    const [pr] = await pullRequest(41, sha(), 'opened');
    await pullRequest(41, sha(), 'closed');
    t.match((await phase(pr!)).phase, /^(queued|waiting)$/, 'nor does closing its pull request abort one');
    t.equal((await kiln.api('PATCH', '/projects/acme/app', { token, body: { cancel_superseded: 'no' } })).status, 400, 'a boolean only');
  });

  await t.test('requires_approval on the project parks a fork\'s pull request in every task', async (t) => {
    t.same(await pullRequest(21, sha(), 'opened', 999_001), [], 'no task requires approval: nothing');
    const patched = await kiln.api('PATCH', '/projects/acme/app', { token, body: { requires_approval: true } });
    t.match(patched.message, { requires_approval: true });
    const parked = await pullRequest(22, sha(), 'opened', 999_001);
    t.equal(parked.length, 1, 'the default task takes it');
    const [row] = await kiln.sql<{ phase: string; awaiting_approval: boolean }[]>`select phase, awaiting_approval from evaluations where id = ${parked[0]!}`;
    t.same(row, { phase: 'waiting', awaiting_approval: true }, 'parked for approval');
  });
});
