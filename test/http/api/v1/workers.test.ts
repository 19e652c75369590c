import t from 'tap';
import { createHash } from 'node:crypto';
import { startTestKiln } from '../../../support/kiln.js';
import { signUp } from '../../../support/accounts.js';

t.test('worker registrations: token shown once, stored as its SHA-256', async (t) => {
  const kiln = await startTestKiln(t);
  await signUp(kiln, 'root');
  const ada = await signUp(kiln, 'ada');
  const bob = await signUp(kiln, 'bob');
  await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } });
  await kiln.api('POST', '/orgs/acme/users', { token: ada.token, body: { user: 'bob', role: 'Write' } });
  await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'web', repository: 'file:///x' } });

  const workerId = '7d3f5a52-2f0b-4c1e-9a51-4a0f1d2c3b4e';
  const created = await kiln.api<{ id: string; token: string; worker_id: string; name: string; created_by: string }>('POST', '/projects/web/workers', {
    token: ada.token, body: { name: 'builder-1', worker_id: workerId },
  });
  t.equal(created.status, 200, JSON.stringify(created.message));
  t.match(created.message, { name: 'builder-1', worker_id: workerId, created_by: 'ada' });
  t.equal(Buffer.from(created.message.token, 'base64url').length, 48, '48 random bytes');
  const [row] = await kiln.sql<{ token_hash: string }[]>`select token_hash from worker_registrations`;
  t.equal(row!.token_hash, createHash('sha256').update(created.message.token).digest('hex'));

  const list = await kiln.api<Record<string, unknown>[]>('GET', '/projects/web/workers', { token: ada.token });
  t.equal(list.message.length, 1);
  t.notOk('token' in list.message[0]! || 'token_hash' in list.message[0]!, 'the list has no secrets');
  t.equal((await kiln.api('POST', '/projects/web/workers', { token: bob.token, body: {} })).status, 403, 'Write lacks manageWorkers');
  t.equal((await kiln.api('POST', '/projects/web/workers', { token: ada.token, body: { worker_id: 'nope' } })).status, 400);
  t.equal((await kiln.api('POST', '/projects/web/workers', { token: ada.token, body: { name: 'n'.repeat(101) } })).status, 400);
  t.equal((await kiln.api('DELETE', `/projects/web/workers/${created.message.id}`, { token: bob.token })).status, 403);
  t.equal((await kiln.api('DELETE', `/projects/web/workers/${created.message.id}`, { token: ada.token })).status, 200);
  t.equal((await kiln.api('DELETE', `/projects/web/workers/${created.message.id}`, { token: ada.token })).status, 404);
  t.equal((await kiln.sql`select 1 from worker_registrations`).length, 0);
});
