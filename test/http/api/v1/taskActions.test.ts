import t from 'tap';
import { verifySignature } from '../../../../protocol/index.js';
import { signUp } from '../../../support/accounts.js';
import { eventually, startEventKiln, startReceiver } from '../../../support/events.js';
import { startSmtpServer } from '../../../support/smtpServer.js';

// Task actions: per-task receivers of the same envelopes as webhooks, a signed web request and an
// e-mail through a real SMTP server, each run reported as task.action.update.

t.test('task actions: CRUD, a signed web request, an e-mail, and task.action.update', async (t) => {
  const smtp = await startSmtpServer(t);
  const kiln = await startEventKiln(t, {
    overrides: { 'email.enable': true, 'email.smtp.host': '127.0.0.1', 'email.smtp.port': smtp.port, 'email.smtp.useTls': false, 'email.from.address': 'kiln@example.test' },
  });
  const actionReceiver = await startReceiver(t);
  const projectReceiver = await startReceiver(t);
  const ada = await signUp(kiln, 'ada');
  const vic = await signUp(kiln, 'vic');
  const eve = await signUp(kiln, 'eve');
  await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } });
  await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'web', repository: 'https://git.example/web.git' } });
  await kiln.api('POST', '/orgs/acme/users', { token: ada.token, body: { user: 'vic', role: 'View' } });
  await kiln.api('PUT', '/projects/web/webhooks', { token: ada.token, body: { url: projectReceiver.url, events: ['task.*', 'build.*'] } });
  const base = '/tasks/web/default/actions';

  const web = await kiln.api<{ id: string; secret: string; kind: string; url: string }>('PUT', base, {
    token: ada.token, body: { kind: 'send_web_request', name: 'notify', url: actionReceiver.url, events: ['build.*'] },
  });
  t.equal(web.status, 200);
  t.match(web.message, { kind: 'send_web_request', url: actionReceiver.url, secret: /^[0-9a-f]{64}$/ });
  const mail = await kiln.api<{ id: string; secret?: string; to: string[] }>('POST', base, {
    token: ada.token, body: { kind: 'send_mail', name: 'mail ops', to: ['ops@example.test'], events: ['build.queued'] },
  });
  t.equal(mail.status, 200);
  t.same(mail.message.to, ['ops@example.test']);
  t.notOk('secret' in mail.message, 'e-mail actions have no signing secret');

  t.match(await kiln.api('PUT', base, { token: ada.token, body: { kind: 'send_mail', name: 'notify', to: ['x@example.test'] } }), { status: 409, code: 'task_action_exists' });
  t.match(await kiln.api('PUT', base, { token: ada.token, body: { kind: 'send_web_request', name: 'x', url: 'gopher://x' } }), { status: 400, message: /^url:/ });
  t.match(await kiln.api('PUT', base, { token: ada.token, body: { kind: 'page_someone', name: 'x' } }), { status: 400, code: 'invalid_body' });
  t.match(await kiln.api('PATCH', `${base}/${mail.message.id}`, { token: ada.token, body: { url: 'https://example.test/' } }), { status: 400, message: 'url: a send_mail action has no URL' });
  t.match(await kiln.api('POST', `${base}/${mail.message.id}/rotate-secret`, { token: ada.token }), { status: 409, code: 'no_signing_secret' });
  t.match(await kiln.api('GET', '/tasks/web/nope/actions', { token: ada.token }), { status: 404, message: 'no task "nope" in project "acme/web"' });
  const listed = await kiln.api<{ name: string; secret?: string }[]>('GET', base, { token: ada.token });
  t.same(listed.message.map((a) => a.name), ['mail ops', 'notify']);
  t.notOk(listed.message.some((a) => 'secret' in a));

  for (const [who, status] of [[null, 401], [eve, 404], [vic, 403]] as const) {
    for (const [method, path] of [['GET', base], ['PUT', base], ['GET', `${base}/${web.message.id}`], ['PATCH', `${base}/${web.message.id}`], ['DELETE', `${base}/${web.message.id}`],
      ['POST', `${base}/${web.message.id}/rotate-secret`], ['GET', `${base}/${web.message.id}/deliveries`]] as const) {
      const body = method === 'PUT' ? { kind: 'send_mail', name: 'z', to: ['z@example.test'] } : method === 'PATCH' ? { name: 'z' } : undefined;
      const r = await kiln.api(method, path, { ...(who ? { token: who.token } : {}), ...(body ? { body } : {}) });
      t.equal(r.status, status, `${method} ${path} as ${who?.username ?? 'anonymous'}`);
    }
  }

  const [ids] = await kiln.sql<{ task_id: string; project_id: string }[]>`select t.id as task_id, p.id as project_id from tasks t join projects p on p.id = t.project_id where t.name = 'default'`;
  const uuid = '7f1c2a9e-3b4d-4c5e-8f60-718293a4b5c6';
  await kiln.events.events.transaction(async (_tx, emit) => {
    emit('build.queued', { build_id: uuid, derivation_build: uuid, evaluation_id: uuid, status: 'queued', task: 'default', project: 'acme/web', entry_point: true },
      { projectId: ids!.project_id, taskId: ids!.task_id, evaluationId: uuid, buildId: uuid });
  });
  await actionReceiver.waitFor(1);
  const request = actionReceiver.requests[0]!;
  t.equal(request.headers['x-service-event'], 'build.queued');
  t.ok(verifySignature(web.message.secret, request.body, request.headers['x-service-signature'] as string), 'signed with the action’s secret');
  const sent = await eventually('the e-mail', async () => smtp.mails.find((m) => m.to.includes('ops@example.test')));
  t.same(sent.to, ['ops@example.test']);
  t.match(sent.text, /Subject: \[kiln\] build\.queued acme\/web\/default/);
  t.match(sent.text, /"entry_point": true/);

  const updates = await eventually('both task.action.update reports at the project webhook', async () => {
    const found = projectReceiver.requests.map((r) => JSON.parse(r.body) as { event: string; content: Record<string, unknown> }).filter((e) => e.event === 'task.action.update');
    return found.length >= 2 ? found : undefined;
  });
  t.same(updates.map((u) => [u.content['action'], u.content['status'], u.content['event']]).sort(), [['mail ops', 'delivered', 'build.queued'], ['notify', 'delivered', 'build.queued']]);
  const projectEvents = projectReceiver.requests.map((r) => (JSON.parse(r.body) as { event: string }).event);
  t.same(projectEvents.filter((e) => e === 'task.action.create').length, 2, 'creating actions is reported');
  t.equal(actionReceiver.requests.filter((r) => r.headers['x-service-event'] !== 'build.queued').length, 0, 'actions never receive reports about actions');

  const history = await kiln.api<{ deliveries: { status: string; event: string }[] }>('GET', `${base}/${web.message.id}/deliveries`, { token: ada.token });
  t.match(history.message.deliveries, [{ status: 'delivered', event: 'build.queued' }]);
  t.equal((await kiln.api('DELETE', `${base}/${mail.message.id}`, { token: ada.token })).status, 200);
  await eventually('task.action.delete reported', async () =>
    projectReceiver.requests.some((r) => r.headers['x-service-event'] === 'task.action.delete') ? true : undefined);
});
