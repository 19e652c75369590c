import t from 'tap';
import { startTestKiln } from '../../../support/kiln.js';
import { signUp } from '../../../support/accounts.js';
import { insertCache } from '../../../support/modelRows.js';

t.test('subscription paths over HTTP', async (t) => {
  const kiln = await startTestKiln(t);
  await signUp(kiln, 'root');
  const ada = await signUp(kiln, 'ada');
  const cat = await signUp(kiln, 'cat');
  await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } });
  await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'web', repository: 'file:///x' } });
  const cacheId = await insertCache(kiln.sql, 'shared');
  await kiln.sql`update caches set owner_id = ${cat.id}, public = true where id = ${cacheId}`;

  const asked = await kiln.api('POST', '/projects/web/subscribe/shared', { token: ada.token, body: { mode: 1 } });
  t.same([asked.status, asked.message], [200, 'Subscription requested']);
  t.match((await kiln.api('GET', '/projects/web/subscribe', { token: ada.token })).message, { subscriptions: [], requests: [{ cache: 'shared', mode: 1 }] });
  const requests = await kiln.api<{ id: string }[]>('GET', '/caches/shared/subscription-requests', { token: cat.token });
  t.equal(requests.message.length, 1);
  t.equal((await kiln.api('GET', '/caches/shared/subscription-requests', { token: ada.token })).status, 403);
  t.equal((await kiln.api('POST', `/caches/shared/subscription-requests/${requests.message[0]!.id}/approve`, { token: cat.token })).message, 'Subscribed');
  t.match((await kiln.api('GET', '/caches/shared/subscriptions', { token: cat.token })).message, [{ project: 'acme/web', mode: 1 }]);
  t.equal((await kiln.api('DELETE', '/projects/web/subscribe/shared', { token: ada.token })).message, 'Unsubscribed');

  await kiln.api('POST', '/orgs/acme/subscribe/shared', { token: ada.token, body: {} });
  const orgRequest = (await kiln.api<{ id: string; mode: number }[]>('GET', '/caches/shared/subscription-requests', { token: cat.token })).message[0]!;
  t.equal(orgRequest.mode, 0, 'mode defaults to 0');
  t.equal((await kiln.api('DELETE', `/caches/shared/subscription-requests/${orgRequest.id}`, { token: cat.token })).message, 'Subscription request denied');
  t.match((await kiln.api('GET', '/orgs/acme/subscribe', { token: ada.token })).message, { subscriptions: [], requests: [] });

  for (const body of [{ mode: 3 }, { mode: '0' }, { mode: 1.5 }, { mode: 0, extra: true }]) {
    const res = await kiln.api('POST', '/projects/web/subscribe/shared', { token: ada.token, body });
    t.equal(res.status, 400, JSON.stringify(body));
    t.match(res.message, /^(mode|body): |extra/);
  }
  t.equal((await kiln.sql`select 1 from subscription_requests`).length, 0, 'nothing written');
});
