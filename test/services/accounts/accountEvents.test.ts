import t from 'tap';
import { freshAddress, login, signUp } from '../../support/accounts.js';
import { startEventKiln, startReceiver } from '../../support/events.js';
import { names, outboxReader } from '../../support/outboxEvents.js';

// Account activity (login.success, login.failure, api_key.*, session.revoke, user.*): durable,
// written with the change, delivered to instance webhooks only, and never carrying a secret.

t.test('account activity is written with the change and reaches instance webhooks only', async (t) => {
  const kiln = await startEventKiln(t);
  const receiver = await startReceiver(t);
  const next = outboxReader(kiln.sql);
  const ada = await signUp(kiln, 'ada');
  const signedUp = await next();
  t.same(names(signedUp), ['login.success', 'user.create']);
  t.match(signedUp.find((e) => e.event === 'user.create'), { content: { user: 'ada', user_id: ada.id, via: 'registration', superuser: true }, scope: { user_id: ada.id } });
  t.match(signedUp.find((e) => e.event === 'login.success'), { content: { user: 'ada', user_id: ada.id, method: 'password', session_id: String, address: /^198\.51\./ } });

  await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } });
  await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'web', repository: 'https://git.example/web.git' } });
  await kiln.api('PUT', '/admin/webhooks', { token: ada.token, body: { url: `${receiver.url}?instance`, events: ['login.*', 'api_key.*', 'session.*', 'user.*'] } });
  await kiln.api('PUT', '/projects/web/webhooks', { token: ada.token, body: { url: `${receiver.url}?project` } });
  await next();

  const wrong = await kiln.api('POST', '/auth/basic/login', { body: { loginname: 'ada', password: 'not the password' }, headers: freshAddress() });
  t.equal(wrong.status, 401);
  t.match(await next(), [{ event: 'login.failure', content: { loginname: 'ada', reason: 'invalid_credentials' } }]);

  const key = await kiln.api<{ id: string; secret: string }>('POST', '/user/keys', { token: ada.token, body: { name: 'ci', permissions: ['viewProject'], project: 'acme/web' } });
  t.equal(key.status, 200);
  const created = await next();
  t.match(created, [{ event: 'api_key.create', content: { user: 'ada', key_id: key.message.id, name: 'ci', permissions: ['viewProject'], project: 'acme/web' } }]);
  t.notOk(JSON.stringify(created).includes(key.message.secret), 'never the key itself');
  t.equal((await kiln.api('DELETE', '/user/keys?name=ci', { token: ada.token })).status, 200);
  t.match(await next(), [{ event: 'api_key.delete', content: { key_id: key.message.id, name: 'ci' } }]);

  const second = await login(kiln, 'ada', ada.password);
  await next();
  const changed = await kiln.api('PATCH', '/user/settings', { token: ada.token, body: { current_password: ada.password, new_password: 'a new long password', name: 'Ada' } });
  t.equal(changed.status, 200);
  const afterChange = await next();
  t.same(names(afterChange), ['session.revoke', 'user.update']);
  t.match(afterChange.find((e) => e.event === 'session.revoke'), { content: { user: 'ada', reason: 'password_change' } });
  t.match(afterChange.find((e) => e.event === 'user.update'), { content: { changes: ['name', 'password'] } });
  t.notOk(JSON.stringify(afterChange).includes('a new long password'), 'never a password');
  t.equal((await kiln.api('GET', '/user', { token: second })).status, 401, 'the other session was revoked');

  t.equal((await kiln.api('POST', '/auth/logout', { token: ada.token })).status, 200);
  t.match(await next(), [{ event: 'session.revoke', content: { reason: 'logout' } }]);

  // login.success ×1, login.failure, api_key.create/delete, session.revoke ×2, user.update: 7, instance only.
  await receiver.waitFor(7);
  t.same(receiver.requests.map((r) => r.url.split('?')[1]), Array(7).fill('instance'), 'project webhooks never receive account activity');
  t.same(receiver.requests.map((r) => r.headers['x-service-event']).sort(),
    ['api_key.create', 'api_key.delete', 'login.failure', 'login.success', 'session.revoke', 'session.revoke', 'user.update']);
});
