import t from 'tap';
import { startTestKiln } from '../../../support/kiln.js';
import { signUp } from '../../../support/accounts.js';
import { insertCache } from '../../../support/modelRows.js';

t.test('invitation and member paths over HTTP', async (t) => {
  const kiln = await startTestKiln(t);
  await signUp(kiln, 'root');
  const ada = await signUp(kiln, 'ada');
  const bob = await signUp(kiln, 'bob');
  const eve = await signUp(kiln, 'eve');
  await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } });
  await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'web', repository: 'file:///x' } });

  const sent = await kiln.api('POST', '/projects/web/users', { token: ada.token, body: { user: 'bob', role: 'Write' } });
  t.same([sent.status, sent.message], [200, 'Invitation sent to bob']);
  const again = await kiln.api('POST', '/projects/acme%2Fweb/users', { token: ada.token, body: { user: 'bob', role: 'Write' } });
  t.equal(again.status, 404, '{project} is one segment: a UUID or a name');
  const dup = await kiln.api('POST', '/projects/web/users', { token: ada.token, body: { user: 'bob', role: 'View' } });
  t.same([dup.status, dup.code], [409, 'invitation_exists']);
  t.match((await kiln.api('GET', '/projects/web/invitations', { token: ada.token })).message, [{ user: 'bob', role: 'Write', project: 'acme/web' }]);
  t.equal((await kiln.api('GET', '/projects/web/invitations', { token: bob.token })).status, 404, 'pending lists are for member managers');

  const mine = await kiln.api<{ id: string }[]>('GET', '/user/invitations', { token: bob.token });
  t.equal(mine.message.length, 1);
  const id = mine.message[0]!.id;
  t.same([(await kiln.api('POST', `/invitations/${id}/accept`, { token: eve.token })).status], [403], 'another account may not accept');
  t.same((await kiln.api('POST', `/invitations/${id}/accept`, { token: bob.token })).status, 200);
  t.match((await kiln.api('GET', '/projects/web/users', { token: bob.token })).message, [{ user: 'bob', role: 'Write' }]);
  t.match((await kiln.api('GET', '/projects/acme/web', { token: bob.token })).message, { role: 'Write' });

  await kiln.api('POST', '/projects/web/users', { token: ada.token, body: { user: 'eve', role: 'View' } });
  const eveInv = (await kiln.api<{ id: string }[]>('GET', '/user/invitations', { token: eve.token })).message[0]!.id;
  t.equal((await kiln.api('DELETE', `/invitations/${eveInv}`, { token: bob.token })).status, 403, 'Write may not revoke');
  t.equal((await kiln.api('DELETE', `/invitations/${eveInv}`, { token: ada.token })).message, 'Invitation revoked');
  await kiln.api('POST', '/projects/web/users', { token: ada.token, body: { user: 'eve', role: 'View' } });
  const eveInv2 = (await kiln.api<{ id: string }[]>('GET', '/user/invitations', { token: eve.token })).message[0]!.id;
  t.equal((await kiln.api('POST', `/invitations/${eveInv2}/decline`, { token: eve.token })).message, 'Invitation declined');

  t.equal((await kiln.api('PATCH', '/projects/web/users', { token: ada.token, body: { user: 'bob', role: 'View' } })).status, 200);
  t.equal((await kiln.api('DELETE', '/projects/web/users', { token: ada.token, body: { user: 'bob' } })).status, 200);
  t.same((await kiln.api('GET', '/projects/web/users', { token: ada.token })).message, []);

  t.test('caches: /caches/{cache}/users and /caches/{cache}/invitations', async (t) => {
    const cacheId = await insertCache(kiln.sql, 'main');
    await kiln.sql`update caches set owner_id = ${ada.id} where id = ${cacheId}`;
    t.equal((await kiln.api('POST', '/caches/main/users', { token: ada.token, body: { user: 'eve', role: 'View' } })).message, 'Invitation sent to eve');
    t.match((await kiln.api('GET', '/caches/main/invitations', { token: ada.token })).message, [{ cache: 'main', user: 'eve' }]);
    t.equal((await kiln.api('GET', '/caches/main/users', { token: eve.token })).status, 404, 'not a member yet');
    const inv = (await kiln.api<{ id: string }[]>('GET', '/user/invitations', { token: eve.token })).message[0]!.id;
    await kiln.api('POST', `/invitations/${inv}/accept`, { token: eve.token });
    t.match((await kiln.api('GET', '/caches/main/users', { token: eve.token })).message, [{ user: 'eve', role: 'View' }]);
    await kiln.sql`update caches set state_managed = true where id = ${cacheId}`;
    const refused = await kiln.api('POST', '/caches/main/users', { token: ada.token, body: { user: 'bob', role: 'View' } });
    t.same([refused.status, refused.code], [403, 'state_managed']);
  });

  t.test('bad bodies', async (t) => {
    for (const body of [{}, { user: 'bob' }, { role: 'View' }, { user: 'bob', role: 'Boss' }, { user: 'a b', role: 'View' }, { user: 'bob', role: 'View', extra: 1 }]) {
      const res = await kiln.api('POST', '/projects/web/users', { token: ada.token, body });
      t.equal(res.status, 400, JSON.stringify(body));
      t.equal(res.code, 'invalid_body');
    }
    t.equal((await kiln.sql`select 1 from invitations`).length, 0, 'nothing written');
  });
});
