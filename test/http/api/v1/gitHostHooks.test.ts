// POST /api/v1/hooks/github against a loopback Git host (test/support/gitHost.ts) and real
// captured payloads: signatures, headers and payloads checked before anything is recorded,
// deliveries deduplicated, push and pull_request evaluations with their trigger, installations
// remembered, and the check runs (or commit statuses) kiln sends to the host, retried on failure.
// No worker runs here: evaluations stay queued unless a test aborts one
// (test/services/gitHosts/gitHostFlow.process.test.ts builds for real).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import t from 'tap';
import { startTestKiln } from '../../../support/kiln.js';
import { signUp } from '../../../support/accounts.js';
import { createFlakeRepo, shellFlake } from '../../../support/flakeRepo.js';
import { examplePayload, gitHostOptions, pointAt, sendHook, startTestGitHost, type HostCall } from '../../../support/gitHost.js';
import { eventually } from '../../../support/eventually.js';
import { Webhooks } from '@octokit/webhooks';
import { EvaluationView } from '../../../../protocol/api/evaluations.js';
import { ProjectEvaluationsPage } from '../../../../protocol/api/projectEvaluations.js';

const FRONTEND = 'https://ci.example.test';
const INSTALLATION = 957387;

t.test('Git host webhooks', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-githost-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const host = await startTestGitHost(dir);
  t.teardown(() => host.close());
  // where payloads may point the API; kiln must never call it
  const decoy = await startTestGitHost(mkdtempSync(join(dir, 'decoy-')));
  t.teardown(() => decoy.close());
  const kiln = await startTestKiln(t, {
    ...gitHostOptions(host), 'frontend.url': FRONTEND,
  }, { gitHostRetryBaseMs: 20 });
  const repo = createFlakeRepo(join(dir, 'repo'), { 'flake.nix': shellFlake(randomBytes(8).toString('hex'), '      hello = mk "hello" "mkdir $out";') });
  const { token } = await signUp(kiln, 'ada');
  t.equal((await kiln.api('PUT', '/orgs', { token, body: { name: 'acme' } })).status, 200);
  const made = await kiln.api('PUT', '/projects/acme', { token, body: { name: 'app', repository: repo.url, wildcard: 'packages.x86_64-linux.*' } });
  t.equal(made.status, 200, String(made.message));

  const push = (opts: { branch?: string; after?: string; installation?: number | null; ref?: string } = {}) => {
    const payload = pointAt(examplePayload('push'), host, 'acme/app', repo.url, opts.installation === undefined ? INSTALLATION : opts.installation);
    Object.assign(payload, { ref: opts.ref ?? `refs/heads/${opts.branch ?? 'main'}`, after: opts.after ?? repo.commit, deleted: false });
    return payload;
  };
  const counts = async () => {
    const [row] = await kiln.sql<{ deliveries: number; evaluations: number; installations: number }[]>`
      select (select count(*)::int from git_host_deliveries) as deliveries, (select count(*)::int from evaluations) as evaluations,
        (select count(*)::int from git_host_installations) as installations`;
    return row!;
  };
  const callsFor = (evaluationId: string): HostCall[] => host.calls.filter((c) => c.body['external_id'] === evaluationId || (c.body['target_url'] as string | undefined)?.endsWith(evaluationId));

  await t.test('a push to the default branch starts an evaluation of the pushed commit, and reports it queued', async (t) => {
    const sent = await sendHook(kiln.url, 'push', push(), { secret: host.secret });
    t.equal(sent.status, 200, JSON.stringify(sent.json));
    const outcome = sent.json.message as { duplicate: boolean; evaluations: string[]; event: string };
    t.equal(outcome.duplicate, false);
    t.equal(outcome.evaluations.length, 1, 'one task, one evaluation');
    const id = outcome.evaluations[0]!;
    const view = EvaluationView.parse((await kiln.api('GET', `/evals/${id}`, { token })).message);
    t.match(view, { trigger: 'push', branch: 'main', pull_request: null, commit: repo.commit, task: 'default' });
    t.match(view.phase, /^(queued|waiting)$/, 'no worker: it waits');
    const created = await eventually(() => callsFor(id).find((c) => c.method === 'POST'), { message: 'the check run is created' });
    t.equal(created.path, '/repos/acme/app/check-runs');
    t.match(created.body, { head_sha: repo.commit, status: 'queued', details_url: `${FRONTEND}/evals/${id}`, name: 'kiln: acme/app default' });
    t.equal(created.installation, INSTALLATION, 'with a token of the installation the payload names');
    t.ok(host.tokensIssued >= 1, 'the token was bought with the app JWT');
  });

  await t.test('the project list filters by branch, pull request and trigger', async (t) => {
    const list = async (query: string) => ProjectEvaluationsPage.parse((await kiln.api('GET', `/projects/acme/app/evaluations${query}`, { token })).message);
    t.equal((await list('?branch=main')).total, 1);
    t.equal((await list('?branch=other')).total, 0);
    t.equal((await list('?trigger=push')).total, 1);
    t.equal((await list('?trigger=manual')).total, 0);
    t.equal((await list('?pull_request=7')).total, 0);
    t.match((await list('')).evaluations[0], { trigger: 'push', branch: 'main', pull_request: null });
    t.equal((await kiln.api('GET', '/projects/acme/app/evaluations?trigger=cron', { token })).status, 400);
    t.equal((await kiln.api('GET', '/projects/acme/app/evaluations?pull_request=0', { token })).status, 400);
  });

  await t.test('a delivery sent again starts nothing', async (t) => {
    const delivery = randomUUID();
    const first = await sendHook(kiln.url, 'push', push(), { secret: host.secret, delivery });
    t.equal((first.json.message as { evaluations: string[] }).evaluations.length, 1);
    const before = await counts();
    const again = await sendHook(kiln.url, 'push', push(), { secret: host.secret, delivery });
    t.equal(again.status, 200);
    t.match(again.json.message, { duplicate: true, evaluations: [] });
    t.same(await counts(), before);
  });

  await t.test('pushes that are not a configured branch head start nothing', async (t) => {
    for (const payload of [push({ branch: 'feature' }), push({ ref: 'refs/tags/v1' }), { ...push(), deleted: true }, push({ after: '0'.repeat(40) })]) {
      const sent = await sendHook(kiln.url, 'push', payload, { secret: host.secret });
      t.equal(sent.status, 200);
      t.same((sent.json.message as { evaluations: string[] }).evaluations, [], String(payload['ref']));
    }
  });

  await t.test('a pull request is evaluated at its head when opened, synchronized or reopened; closed starts nothing', async (t) => {
    const pr = (action: string) => {
      const payload = pointAt(examplePayload('pull_request', action), host, 'acme/app', repo.url, INSTALLATION);
      const pull = payload['pull_request'] as { head: { sha: string; ref: string }; base: { ref: string } };
      pull.head.sha = repo.commit;
      pull.base.ref = 'main';
      payload['number'] = 7;
      return payload;
    };
    const opened = await sendHook(kiln.url, 'pull_request', pr('opened'), { secret: host.secret });
    t.equal(opened.status, 200, JSON.stringify(opened.json));
    const [id] = (opened.json.message as { evaluations: string[] }).evaluations;
    t.ok(id);
    t.match((await kiln.api('GET', `/evals/${id}`, { token })).message, { trigger: 'pull_request', pull_request: 7, branch: null, commit: repo.commit });
    const synchronized = await sendHook(kiln.url, 'pull_request', pr('synchronize'), { secret: host.secret });
    t.equal((synchronized.json.message as { evaluations: string[] }).evaluations.length, 1);
    const closed = await sendHook(kiln.url, 'pull_request', pr('closed'), { secret: host.secret });
    t.same((closed.json.message as { evaluations: string[] }).evaluations, []);
    const listed = ProjectEvaluationsPage.parse((await kiln.api('GET', '/projects/acme/app/evaluations?pull_request=7', { token })).message);
    t.equal(listed.total, 2, 'opened and synchronize');
  });

  await t.test('a pull request from a fork: nothing for ordinary tasks; parked for approval where a task requires it', async (t) => {
    const forkPr = (number: number) => {
      const payload = pointAt(examplePayload('pull_request', 'opened'), host, 'acme/app', repo.url, INSTALLATION);
      const pull = payload['pull_request'] as { head: { sha: string; repo: { id: number } }; base: { ref: string } };
      pull.head.sha = repo.commit;
      pull.head.repo = { ...pull.head.repo, id: 999_999 }; // another repository: a fork
      pull.base.ref = 'main';
      payload['number'] = number;
      return payload;
    };
    const ignored = await sendHook(kiln.url, 'pull_request', forkPr(9), { secret: host.secret });
    t.same((ignored.json.message as { evaluations: string[] }).evaluations, [], 'no task requires approval: nothing');

    t.equal((await kiln.api('PUT', '/tasks/app', { token, body: { name: 'gated', requires_approval: true } })).status, 200);
    t.teardown(async () => {
      await kiln.api('DELETE', '/tasks/app/gated', { token });
    });
    const sent = await sendHook(kiln.url, 'pull_request', forkPr(8), { secret: host.secret });
    const started = (sent.json.message as { evaluations: string[] }).evaluations;
    t.equal(started.length, 1, 'only the gated task');
    const id = started[0]!;
    t.match((await kiln.api('GET', `/evals/${id}`, { token })).message, { phase: 'waiting', task: 'gated', trigger: 'pull_request', pull_request: 8 });
    const [parked] = await kiln.sql<{ awaiting_approval: boolean }[]>`select awaiting_approval from evaluations where id = ${id}`;
    t.equal(parked!.awaiting_approval, true);

    // someone who may see the project but not trigger evaluations cannot approve
    const { token: bob } = await signUp(kiln, 'bob');
    const refused = await kiln.api('POST', `/evals/${id}`, { token: bob, body: { method: 'approve' } });
    t.ok(refused.status === 403 || refused.status === 404, `an outsider: ${refused.status}`);
    t.equal((await kiln.api('POST', `/evals/${id}`, { token: bob, body: { method: 'merge' } })).status, 400, 'an unknown method');

    const approved = await kiln.api('POST', `/evals/${id}`, { token, body: { method: 'approve' } });
    t.equal(approved.status, 200, JSON.stringify(approved));
    t.match((await kiln.api('GET', `/evals/${id}`, { token })).message, { phase: /^(queued|waiting)$/ });
    const events = await kiln.sql<{ event: string }[]>`select event from event_outbox where evaluation_id = ${id} order by created_at`;
    t.ok(events.some((e) => e.event === 'evaluation.approval_granted'), 'evaluation.approval_granted is emitted');
    const [after] = await kiln.sql<{ awaiting_approval: boolean }[]>`select awaiting_approval from evaluations where id = ${id}`;
    t.equal(after!.awaiting_approval, false);
    t.match(await kiln.api('POST', `/evals/${id}`, { token, body: { method: 'approve' } }), { status: 409, code: 'evaluation_not_awaiting_approval' }, 'approved once only');
    const created = await eventually(() => callsFor(id).find((c) => c.method === 'POST'), { message: 'the parked evaluation is reported' });
    t.equal(created.body['status'], 'queued');
  });

  await t.test('installations and their repositories are remembered', async (t) => {
    const created = examplePayload('installation', 'created');
    const installation = created['installation'] as { id: number; access_tokens_url: string };
    // an address elsewhere: kiln keeps and calls gitHostApp.apiUrl only
    installation.access_tokens_url = `${decoy.url}/app/installations/${installation.id}/access_tokens`;
    t.equal((await sendHook(kiln.url, 'installation', created, { secret: host.secret })).status, 200);
    const [row] = await kiln.sql<{ account: string }[]>`select account from git_host_installations where id = ${installation.id}`;
    t.same(row, { account: 'Codertocat' });
    const repos = await kiln.sql<{ full_name: string }[]>`select full_name from git_host_repositories where installation_id = ${installation.id}`;
    t.ok(repos.length > 0, 'the repositories it was installed on');

    const added = examplePayload('installation_repositories', 'added');
    Object.assign(added['installation'] as object, { id: installation.id });
    t.equal((await sendHook(kiln.url, 'installation_repositories', added, { secret: host.secret })).status, 200);
    t.ok((await kiln.sql`select 1 from git_host_repositories where installation_id = ${installation.id} and full_name = 'codertocat/space'`).length === 1);
    const removed = examplePayload('installation_repositories', 'removed');
    const gone = (removed['repositories_removed'] as { id: number; full_name: string }[])[0]!;
    await kiln.sql`insert into git_host_repositories (installation_id, repository_id, full_name) values (${installation.id}, ${gone.id}, ${gone.full_name.toLowerCase()}) on conflict do nothing`;
    Object.assign(removed['installation'] as object, { id: installation.id });
    t.equal((await sendHook(kiln.url, 'installation_repositories', removed, { secret: host.secret })).status, 200);
    t.equal((await kiln.sql`select 1 from git_host_repositories where repository_id = ${gone.id}`).length, 0);

    const deleted = examplePayload('installation', 'created');
    Object.assign(deleted, { action: 'deleted' });
    t.equal((await sendHook(kiln.url, 'installation', deleted, { secret: host.secret })).status, 200);
    t.equal((await kiln.sql`select 1 from git_host_installations where id = ${installation.id}`).length, 0, 'uninstalled: forgotten');
  });

  await t.test('API addresses in a signed payload are ignored: every call goes to gitHostApp.apiUrl', async (t) => {
    const payload = push();
    Object.assign(payload['repository'] as object, { hooks_url: `${decoy.url}/repos/acme/app/hooks`, url: `${decoy.url}/repos/acme/app` });
    const sent = await sendHook(kiln.url, 'push', payload, { secret: host.secret });
    t.equal(sent.status, 200, JSON.stringify(sent.json));
    const id = (sent.json.message as { evaluations: string[] }).evaluations[0]!;
    const created = await eventually(() => callsFor(id).find((c) => c.method === 'POST'), { message: 'the check run is created at the configured host' });
    t.equal(created.path, '/repos/acme/app/check-runs');
    t.same(decoy.calls, [], 'the address the payload named got no call and no token');
  });

  await t.test('the same body again under another delivery id (a replay) starts nothing', async (t) => {
    const body = JSON.stringify(push());
    const first = await sendHook(kiln.url, 'push', body, { secret: host.secret });
    t.equal((first.json.message as { evaluations: string[] }).evaluations.length, 1);
    const before = await counts();
    const replayed = await sendHook(kiln.url, 'push', body, { secret: host.secret, delivery: randomUUID() });
    t.equal(replayed.status, 200);
    t.match(replayed.json.message, { duplicate: true, evaluations: [] });
    t.same(await counts(), before, 'no delivery or evaluation recorded');
    const fresh = await sendHook(kiln.url, 'push', push(), { secret: host.secret });
    t.equal((fresh.json.message as { evaluations: string[] }).evaluations.length, 1, 'another push of the same commit is a new body and is evaluated');
  });

  await t.test('a bad signature is 401 and records nothing', async (t) => {
    const body = JSON.stringify(push());
    const before = await counts();
    const wrongSecret = await sendHook(kiln.url, 'push', body, { secret: 'not-the-secret' });
    t.match(wrongSecret, { status: 401, json: { code: 'invalid_signature' } });
    const good = await sendHook(kiln.url, 'push', body, { secret: host.secret });
    t.equal(good.status, 200, 'the same body signed right is accepted');
    const afterGood = await counts();
    const tamperedSignature = (await sendHook(kiln.url, 'push', body.replace('"main"', '"mainx"'), { secret: host.secret, signature: `sha256=${'0'.repeat(64)}` }));
    t.equal(tamperedSignature.status, 401);
    for (const [what, signature] of [['missing', null], ['sha1', `sha1=${'a'.repeat(40)}`], ['uppercase', `sha256=${'A'.repeat(64)}`], ['short', 'sha256=abc'], ['empty', '']] as const) {
      const sent = await sendHook(kiln.url, 'push', body, { secret: host.secret, headers: { 'x-hub-signature-256': signature } });
      t.match(sent, { status: 401, json: { code: 'invalid_signature' } }, what);
    }
    const signature = await new Webhooks({ secret: host.secret }).sign(body);
    const altered = await sendHook(kiln.url, 'push', body.replace(repo.commit, 'f'.repeat(40)), { secret: host.secret, signature });
    t.match(altered, { status: 401, json: { code: 'invalid_signature' } }, 'a body altered after signing');
    const emptyBody = await sendHook(kiln.url, 'push', '', { secret: host.secret, signature: `sha256=${'0'.repeat(64)}` });
    t.equal(emptyBody.status, 401);
    t.ok(before.deliveries < afterGood.deliveries);
    const finalCounts = await counts();
    t.same(finalCounts, afterGood, 'none of the refused ones was recorded');
  });

  await t.test('malformed headers and payloads are 400 and record nothing', async (t) => {
    const before = await counts();
    const cases: [string, string, string | Record<string, unknown>, Record<string, string | null>, RegExp][] = [
      ['no event header', 'push', push(), { 'x-github-event': null }, /X-GitHub-Event is missing/],
      ['bad event header', 'push', push(), { 'x-github-event': 'Push Event' }, /X-GitHub-Event/],
      ['no delivery header', 'push', push(), { 'x-github-delivery': null }, /X-GitHub-Delivery is missing/],
      ['bad delivery header', 'push', push(), { 'x-github-delivery': 'a b' }, /X-GitHub-Delivery/],
      ['long delivery header', 'push', push(), { 'x-github-delivery': 'a'.repeat(201) }, /X-GitHub-Delivery/],
      ['not JSON', 'push', '{"ref": ', {}, /not JSON/],
      ['a JSON array', 'push', '[1, 2]', {}, /not a JSON object/],
      ['push without repository', 'push', { ref: 'refs/heads/main', after: repo.commit }, {}, /payload: repository/],
      ['push with a short commit', 'push', { ...push(), after: 'abc' }, {}, /after/],
      ['pull request without number', 'pull_request', { ...pointAt(examplePayload('pull_request', 'opened'), host, 'acme/app', repo.url, INSTALLATION), number: 'seven' }, {}, /number/],
      ['installation without an account', 'installation', (() => {
        const payload = examplePayload('installation', 'created');
        delete (payload['installation'] as Record<string, unknown>)['account'];
        return payload;
      })(), {}, /installation\.account/],
    ];
    for (const [what, event, body, headers, message] of cases) {
      const sent = await sendHook(kiln.url, event, body, { secret: host.secret, headers });
      t.match(sent, { status: 400, json: { code: 'invalid_webhook', message } }, what);
    }
    t.same(await counts(), before, 'no delivery, evaluation or installation recorded');
  });

  await t.test('any kiln credential or none: the signature alone decides', async (t) => {
    const withToken = await sendHook(kiln.url, 'ping', { zen: 'Design for failure.', hook_id: 1 }, { secret: host.secret, headers: { authorization: `Bearer ${token}` } });
    t.equal(withToken.status, 200);
    const badToken = await sendHook(kiln.url, 'ping', { zen: 'x' }, { secret: host.secret, headers: { authorization: 'Bearer nonsense' } });
    t.equal(badToken.status, 200, 'an unknown bearer token is not what authenticates a webhook');
    const unsigned = await sendHook(kiln.url, 'ping', { zen: 'x' }, { secret: 'wrong', headers: { authorization: `Bearer ${token}` } });
    t.equal(unsigned.status, 401, 'a valid kiln token does not stand in for the signature');
  });

  await t.test('an aborted evaluation is reported cancelled', async (t) => {
    const sent = await sendHook(kiln.url, 'push', push(), { secret: host.secret });
    const id = (sent.json.message as { evaluations: string[] }).evaluations[0]!;
    await eventually(() => callsFor(id).find((c) => c.method === 'POST'), { message: 'the check run is created' });
    t.equal((await kiln.api('POST', `/evals/${id}`, { token, body: { method: 'abort' } })).status, 200);
    const done = await eventually(() => callsFor(id).find((c) => c.method === 'PATCH' && c.body['status'] === 'completed'), { message: 'the check run completes' });
    t.match(done.body, { conclusion: 'cancelled', details_url: `${FRONTEND}/evals/${id}` });
    t.match(done.path, /^\/repos\/acme\/app\/check-runs\/\d+$/);
  });

  await t.test('a host answering 500 and 429 gets the report again later; nothing is lost', async (t) => {
    host.failNext(/^POST \/repos\/acme\/app\/check-runs$/, [{ status: 500 }, { status: 429, headers: { 'retry-after': '1' } }, { status: 502 }]);
    const sent = await sendHook(kiln.url, 'push', push(), { secret: host.secret });
    const id = (sent.json.message as { evaluations: string[] }).evaluations[0]!;
    await eventually(() => host.calls.filter((c) => c.body['external_id'] === id).length >= 4, { timeout: 30_000, message: 'the fourth try creates the check run' });
    const tries = host.calls.filter((c) => c.body['external_id'] === id);
    t.same(tries.slice(0, 4).map((c) => c.method), ['POST', 'POST', 'POST', 'POST'], 'three refused tries, then the one that made it');
    t.equal(tries[3]!.body['status'], 'queued');
    // The host has answered the fourth try; the reporter records it a moment later.
    const row = await eventually(
      async () => (await kiln.sql<{ attempts: number; last_error: string | null; check_run_id: string | null }[]>`select attempts, last_error, check_run_id from git_host_reports where evaluation_id = ${id}`)[0],
      { until: (r) => r?.check_run_id != null, message: 'the report records the check run' },
    );
    t.same(row, { attempts: 0, last_error: null, check_run_id: row!.check_run_id });
    t.ok(row!.check_run_id);
  });

  await t.test('a host without check runs gets commit statuses', async (t) => {
    host.checkRuns = false;
    t.teardown(() => {
      host.checkRuns = true;
    });
    const sent = await sendHook(kiln.url, 'push', push(), { secret: host.secret });
    const id = (sent.json.message as { evaluations: string[] }).evaluations[0]!;
    const status = await eventually(() => host.calls.find((c) => c.path === `/repos/acme/app/statuses/${repo.commit}` && c.body['target_url'] === `${FRONTEND}/evals/${id}`), { message: 'a commit status is sent' });
    t.match(status.body, { state: 'pending', context: 'kiln: acme/app default' });
    // The host has the status; the reporter records the switch to statuses a moment later.
    const row = await eventually(
      async () => (await kiln.sql<{ kind: string }[]>`select kind from git_host_reports where evaluation_id = ${id}`)[0],
      { until: (r) => r?.kind === 'status', message: 'the report records that this host takes commit statuses' },
    );
    t.equal(row!.kind, 'status');
  });

  await t.test('a push without an installation (a plain repository webhook) evaluates but reports nothing', async (t) => {
    const sent = await sendHook(kiln.url, 'push', push({ installation: null }), { secret: host.secret });
    const id = (sent.json.message as { evaluations: string[] }).evaluations[0]!;
    t.ok(id);
    t.equal((await kiln.sql`select 1 from git_host_reports where evaluation_id = ${id}`).length, 0);
  });
});

t.test('gitHostApp.apiUrl obeys outbound.allowedNetworks: a host on loopback not listed gets no call', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-githost-refused-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const host = await startTestGitHost(dir);
  t.teardown(() => host.close());
  const kiln = await startTestKiln(t, { ...gitHostOptions(host), 'outbound.allowedNetworks': [] }, { gitHostRetryBaseMs: 20 });
  const repo = createFlakeRepo(join(dir, 'repo'), { 'flake.nix': shellFlake(randomBytes(8).toString('hex'), '      hello = mk "hello" "mkdir $out";') });
  const { token } = await signUp(kiln, 'ada');
  await kiln.api('PUT', '/orgs', { token, body: { name: 'acme' } });
  t.equal((await kiln.api('PUT', '/projects/acme', { token, body: { name: 'app', repository: repo.url } })).status, 200);
  const payload = pointAt(examplePayload('push'), host, 'acme/app', repo.url, INSTALLATION);
  Object.assign(payload, { ref: 'refs/heads/main', after: repo.commit, deleted: false });
  const sent = await sendHook(kiln.url, 'push', payload, { secret: host.secret });
  const id = (sent.json.message as { evaluations: string[] }).evaluations[0]!;
  const row = await eventually(
    async () => (await kiln.sql<{ last_error: string | null }[]>`select last_error from git_host_reports where evaluation_id = ${id}`)[0],
    { until: (r) => r?.last_error != null, message: 'the report fails' },
  );
  t.match(row!.last_error, /127\.0\.0\.1.*not a public address/);
  t.same(host.calls, [], 'no call, not even for a token');
});

t.test('with gitHostApp.enable false the route answers 404 git_host_disabled', async (t) => {
  const kiln = await startTestKiln(t);
  const sent = await sendHook(kiln.url, 'ping', { zen: 'x' }, { secret: 'whatever' });
  t.match(sent, { status: 404, json: { code: 'git_host_disabled' } });
});
