import t, { type Test } from 'tap';
import { verifySignature } from '../../../../protocol/index.js';
import { signUp, type TestAccount } from '../../../support/accounts.js';
import { startEventKiln, startReceiver, type Receiver } from '../../../support/events.js';
import type { TestKiln } from '../../../support/kiln.js';

// Webhooks through the HTTP API: the three scopes, who may do what, secrets, the test ping and
// the delivery history.

interface World {
  kiln: TestKiln;
  receiver: Receiver;
  /** superuser, owner of org acme, project acme/web and cache main */
  ada: TestAccount;
  /** View on organization acme; can see cache pub */
  vic: TestAccount;
  /** nothing at all */
  eve: TestAccount;
}

async function world(t: Test): Promise<World> {
  const kiln = await startEventKiln(t);
  const receiver = await startReceiver(t);
  const ada = await signUp(kiln, 'ada');
  const vic = await signUp(kiln, 'vic');
  const eve = await signUp(kiln, 'eve');
  const must = async (what: string, p: Promise<{ status: number; message: unknown }>) => {
    const r = await p;
    if (r.status !== 200) throw new Error(`${what}: ${r.status} ${JSON.stringify(r.message)}`);
  };
  await must('org', kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } }));
  await must('project', kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'web', repository: 'https://git.example/web.git' } }));
  await must('member', kiln.api('POST', '/orgs/acme/users', { token: ada.token, body: { user: 'vic', role: 'View' } }));
  await must('cache', kiln.api('PUT', '/caches', { token: ada.token, body: { name: 'main' } }));
  await must('public cache', kiln.api('PUT', '/caches', { token: ada.token, body: { name: 'pub', public: true } }));
  return { kiln, receiver, ada, vic, eve };
}

t.test('CRUD in every scope; the secret is shown on create and rotate-secret only', async (t) => {
  const { kiln, receiver, ada } = await world(t);
  for (const base of ['/projects/web/webhooks', '/caches/main/webhooks', '/admin/webhooks']) {
    const created = await kiln.api<{ id: string; secret: string; scope: string; events: string[]; active: boolean }>('PUT', base, {
      token: ada.token, body: { url: receiver.url, events: ['build.*', 'task.star'], description: 'ci' },
    });
    t.equal(created.status, 200, `${base}: created`);
    t.match(created.message, { url: receiver.url, events: ['build.*', 'task.star'], active: true, description: 'ci', last_delivery: null });
    t.match(created.message.secret, /^[0-9a-f]{64}$/, 'a 256-bit secret');
    const id = created.message.id;
    const listed = await kiln.api<{ id: string; secret?: string }[]>('GET', base, { token: ada.token });
    t.same(listed.message.map((w) => w.id), [id]);
    t.notOk('secret' in listed.message[0]!, 'lists never show the secret');
    const got = await kiln.api<Record<string, unknown>>('GET', `${base}/${id}`, { token: ada.token });
    t.notOk('secret' in got.message, 'nor does GET');
    const patched = await kiln.api<{ events: string[]; active: boolean; url: string }>('PATCH', `${base}/${id}`, { token: ada.token, body: { events: [], active: false } });
    t.match(patched.message, { events: [], active: false, url: receiver.url });
    const rotated = await kiln.api<{ secret: string }>('POST', `${base}/${id}/rotate-secret`, { token: ada.token });
    t.match(rotated.message.secret, /^[0-9a-f]{64}$/);
    t.not(rotated.message.secret, created.message.secret, 'a new secret');
    t.equal((await kiln.api('DELETE', `${base}/${id}`, { token: ada.token })).status, 200);
    t.equal((await kiln.api('GET', `${base}/${id}`, { token: ada.token })).code, 'not_found');
  }
  const viaPost = await kiln.api('POST', '/admin/webhooks', { token: ada.token, body: { url: receiver.url } });
  t.equal(viaPost.status, 200, 'POST creates too');
  const [row] = await kiln.sql<{ secret: Buffer }[]>`select secret from webhooks`;
  t.notOk(row!.secret.toString('utf8').match(/^[0-9a-f]{64}$/), 'the secret is stored sealed');
});

t.test('bad input is refused with the field named', async (t) => {
  const { kiln, ada } = await world(t);
  const create = (body: unknown) => kiln.api('PUT', '/admin/webhooks', { token: ada.token, body });
  t.match(await create({ url: 'ftp://example.test/x' }), { status: 400, code: 'invalid_body', message: 'url: must be an http:// or https:// URL, not ftp://' });
  t.match(await create({ url: 'not a url' }), { status: 400, message: /^url: must be an absolute/ });
  t.match(await create({ url: 'https://user:pw@example.test/' }), { status: 400, message: /^url: must not carry a user name or password/ });
  t.match(await create({ url: 'https://example.test/', events: ['Build.*'] }), { status: 400, message: /^events\.0: an event glob/ });
  t.match(await create({ url: 'https://example.test/', secret: 'mine' }), { status: 400, code: 'invalid_body' });
  t.match(await kiln.api('GET', '/admin/webhooks/not-a-uuid', { token: ada.token }), { status: 404, code: 'not_found' });
  const hook = await kiln.api<{ id: string }>('PUT', '/admin/webhooks', { token: ada.token, body: { url: 'https://example.test/' } });
  t.match(await kiln.api('GET', `/admin/webhooks/${hook.message.id}/deliveries?per_page=500`, { token: ada.token }), { status: 400, code: 'invalid_query', message: /^per_page:/ });
  t.match(await kiln.api('GET', `/projects/web/webhooks/${hook.message.id}`, { token: ada.token }), { status: 404 }, 'an instance webhook is not found under a project');
  t.match(await kiln.api('GET', '/metrics/events', { token: ada.token }), { status: 426, code: 'websocket_required' }, 'a WebSocket path fetched plainly');
});

t.test('the test ping is sent at once, signed, and answered with the recorded delivery', async (t) => {
  const { kiln, receiver, ada } = await world(t);
  const hook = await kiln.api<{ id: string; secret: string }>('PUT', '/projects/web/webhooks', { token: ada.token, body: { url: receiver.url } });
  const { id, secret } = hook.message;
  const ping = await kiln.api<{ id: string; status: string; event: string; attempts: number; body: { event: string; content: Record<string, unknown> }; attempt_log: { response_status: number; response_excerpt: string }[] }>(
    'POST', `/projects/web/webhooks/${id}/test`, { token: ada.token });
  t.equal(ping.status, 200);
  t.match(ping.message, { event: 'webhook.ping', status: 'delivered', attempts: 1, attempt_log: [{ response_status: 200, response_excerpt: 'thanks' }] });
  t.match(ping.message.body, { event: 'webhook.ping', content: { webhook_id: id, scope: 'project', project: 'acme/web' } });
  t.equal(receiver.requests.length, 1, 'the receiver had it before the answer came');
  const request = receiver.requests[0]!;
  t.equal(request.headers['x-service-delivery'], ping.message.id);
  t.equal(request.headers['x-service-event'], 'webhook.ping');
  t.ok(verifySignature(secret, request.body, request.headers['x-service-signature'] as string), 'signed with the webhook’s secret');

  const rotated = await kiln.api<{ secret: string }>('POST', `/projects/web/webhooks/${id}/rotate-secret`, { token: ada.token });
  receiver.mode = 500;
  const failed = await kiln.api<{ id: string; status: string; next_attempt_at: string | null; last_response_status: number }>('POST', `/projects/web/webhooks/${id}/test`, { token: ada.token });
  t.match(failed.message, { status: 'retrying', last_response_status: 500 });
  t.ok(failed.message.next_attempt_at, 'a failed ping is retried like any delivery');
  const second = receiver.requests[1]!;
  t.notOk(verifySignature(secret, second.body, second.headers['x-service-signature'] as string), 'the old secret no longer verifies');
  t.ok(verifySignature(rotated.message.secret, second.body, second.headers['x-service-signature'] as string), 'the rotated one does');

  const history = await kiln.api<{ deliveries: { id: string; status: string }[]; total: number; page: number; per_page: number }>('GET', `/projects/web/webhooks/${id}/deliveries?per_page=1`, { token: ada.token });
  t.match(history.message, { total: 2, page: 1, per_page: 1, deliveries: [{ id: failed.message.id }] }, 'newest first, paged');
  const delivered = await kiln.api<{ deliveries: { id: string }[]; total: number }>('GET', `/projects/web/webhooks/${id}/deliveries?status=delivered`, { token: ada.token });
  t.same(delivered.message.deliveries.map((d) => d.id), [ping.message.id]);
  const detail = await kiln.api<{ attempt_log: unknown[] }>('GET', `/projects/web/webhooks/${id}/deliveries/${ping.message.id}`, { token: ada.token });
  t.equal(detail.message.attempt_log.length, 1);
  t.match(await kiln.api('GET', `/projects/web/webhooks/${id}/deliveries/${id}`, { token: ada.token }), { status: 404 });

  await kiln.api('PATCH', `/projects/web/webhooks/${id}`, { token: ada.token, body: { active: false } });
  t.match(await kiln.api('POST', `/projects/web/webhooks/${id}/test`, { token: ada.token }), { status: 409, code: 'webhook_disabled' });
});

t.test('authorisation of every webhook endpoint', async (t) => {
  const { kiln, ada, vic, eve } = await world(t);
  const ids: Record<string, string> = {};
  for (const base of ['/projects/web/webhooks', '/caches/main/webhooks', '/caches/pub/webhooks', '/admin/webhooks']) {
    ids[base] = (await kiln.api<{ id: string }>('PUT', base, { token: ada.token, body: { url: 'https://example.test/' } })).message.id;
  }
  const endpoints = (base: string): [string, string, unknown?][] => [
    ['GET', base], ['PUT', base, { url: 'https://example.test/' }], ['POST', base, { url: 'https://example.test/' }],
    ['GET', `${base}/${ids[base]}`], ['PATCH', `${base}/${ids[base]}`, { description: 'x' }],
    ['POST', `${base}/${ids[base]}/rotate-secret`], ['GET', `${base}/${ids[base]}/deliveries`],
    ['GET', `${base}/${ids[base]}/deliveries/${ids[base]}`], ['DELETE', `${base}/${ids[base]}`],
  ];
  // [scope, caller, expected status] for every endpoint of the scope (the owner's rows end with DELETE).
  const rows: [string, TestAccount | null, number][] = [
    ['/projects/web/webhooks', null, 401],
    ['/projects/web/webhooks', eve, 404],
    ['/projects/web/webhooks', vic, 403],
    ['/caches/main/webhooks', null, 401],
    ['/caches/main/webhooks', vic, 404],
    ['/caches/pub/webhooks', eve, 403],
    ['/admin/webhooks', null, 401],
    ['/admin/webhooks', vic, 403],
  ];
  for (const [base, who, status] of rows) {
    for (const [method, path, body] of endpoints(base)) {
      const r = await kiln.api(method, path, { ...(who ? { token: who.token } : {}), ...(body ? { body } : {}) });
      t.equal(r.status, status, `${method} ${path} as ${who?.username ?? 'anonymous'}: ${status}`);
    }
  }
  t.match(await kiln.api('POST', `/projects/web/webhooks/${ids['/projects/web/webhooks']}/test`, { token: vic.token }), { status: 403, message: 'manageWebhooks is required on project "acme/web"' });
  t.match(await kiln.api('POST', `/caches/pub/webhooks/${ids['/caches/pub/webhooks']}/test`, { token: eve.token }), { status: 403, message: 'manageCacheWebhooks is required on cache "pub"' });
  t.match(await kiln.api('GET', '/admin/webhooks', { token: vic.token }), { status: 403, message: 'instance webhooks are for superusers' });
  for (const base of Object.keys(ids)) {
    for (const [method, path, body] of endpoints(base)) {
      const r = await kiln.api(method, path, { token: ada.token, ...(body ? { body } : {}) });
      t.ok(r.status === 200 || (r.status === 404 && path.includes('/deliveries/')), `${method} ${path} as the owner: ${r.status}`);
    }
  }
  t.equal((await kiln.api('GET', '/events/catalog')).status, 401, 'the catalog needs a token');
  const catalog = await kiln.api<{ name: string; durable: boolean }[]>('GET', '/events/catalog', { token: eve.token });
  t.equal(catalog.status, 200, 'any signed-in user reads the catalog');
  t.match(catalog.message.find((e) => e.name === 'cache.nar.upload'), { durable: true });
});
