import t from 'tap';
import { signUp } from '../../../support/accounts.js';
import { startEventKiln, startReceiver } from '../../../support/events.js';

// outbound.allowedNetworks with its default (empty): webhooks, task actions and upstream caches
// on loopback, private, link-local or other special addresses are refused when saved, in every
// spelling, and a destination that is saved anyway (a row from before the operator narrowed the
// list) is refused again when kiln connects, without a byte reaching it.

const REFUSED = [
  'http://127.0.0.1:9/hook', 'http://localhost:9/hook', 'http://2130706433/', 'http://127.1/', 'http://0x7f.0.0.1/',
  'http://[::1]/', 'http://[::ffff:127.0.0.1]/', 'http://[::ffff:7f00:1]/', 'http://0.0.0.0/', 'http://0/',
  'http://169.254.169.254/latest/meta-data/', 'http://10.0.0.1/', 'http://172.16.3.4/', 'http://192.168.0.1/',
  'http://100.64.0.1/', 'http://[fd00::1]/', 'http://[fe80::1]/', 'http://[64:ff9b::a9fe:a9fe]/',
];

async function world(t: Parameters<typeof startEventKiln>[0]) {
  const kiln = await startEventKiln(t, { overrides: { 'outbound.allowedNetworks': [] } });
  const ada = await signUp(kiln, 'ada');
  for (const [path, body] of [
    ['/orgs', { name: 'acme' }],
    ['/projects/acme', { name: 'web', repository: 'https://git.example/web.git' }],
    ['/caches', { name: 'main', public: true }],
    ['/caches', { name: 'up', public: true }],
  ] as const) {
    const r = await kiln.api('PUT', path, { token: ada.token, body });
    if (r.status !== 200) throw new Error(`${path}: ${JSON.stringify(r.message)}`);
  }
  const upKey = (await kiln.api<{ public_key: string }>('GET', '/caches/up', { token: ada.token })).message.public_key;
  return { kiln, ada, upKey };
}

t.test('saving a webhook, task action or upstream on a refused address answers 400 destination_refused', async (t) => {
  const { kiln, ada, upKey } = await world(t);
  const saves: [string, string, (url: string) => unknown][] = [
    ['PUT', '/admin/webhooks', (url) => ({ url })],
    ['PUT', '/projects/web/webhooks', (url) => ({ url })],
    ['POST', '/caches/main/webhooks', (url) => ({ url })],
    ['PUT', '/tasks/web/default/actions', (url) => ({ kind: 'send_web_request', name: 'notify', url })],
    ['PUT', '/caches/main/upstreams', (url) => ({ url, public_key: upKey })],
  ];
  for (const [method, path, body] of saves) {
    for (const url of REFUSED) {
      const r = await kiln.api(method, path, { token: ada.token, body: body(url) });
      t.match(r, { status: 400, code: 'destination_refused', message: /^url: .*not a public address, and outbound\.allowedNetworks does not list it$/ }, `${path} ${url}`);
    }
  }
  t.match((await kiln.api('GET', '/admin/webhooks', { token: ada.token })).message, [], 'nothing was saved');
  t.match((await kiln.api('GET', '/caches/main/upstreams', { token: ada.token })).message, []);

  // Public addresses are saved as before; changing their URL to a refused one is refused too.
  const hook = await kiln.api<{ id: string }>('PUT', '/projects/web/webhooks', { token: ada.token, body: { url: 'https://8.8.8.8/hook' } });
  t.equal(hook.status, 200);
  t.match(await kiln.api('PATCH', `/projects/web/webhooks/${hook.message.id}`, { token: ada.token, body: { url: 'http://[::ffff:a9fe:a9fe]/' } }),
    { status: 400, code: 'destination_refused', message: /IPv4-mapped 169\.254\.169\.254, link-local/ });
  const action = await kiln.api<{ id: string }>('PUT', '/tasks/web/default/actions', { token: ada.token, body: { kind: 'send_web_request', name: 'notify', url: 'https://1.1.1.1/a' } });
  t.equal(action.status, 200);
  t.match(await kiln.api('PATCH', `/tasks/web/default/actions/${action.message.id}`, { token: ada.token, body: { url: 'http://127.1:8080/' } }),
    { status: 400, code: 'destination_refused', message: /^url: 127\.0\.0\.1 is loopback/ });
  t.match(await kiln.api('PUT', '/caches/main/upstreams', { token: ada.token, body: { url: 'https://1.1.1.1/cache', public_key: upKey } }), { status: 200 });
  const eve = await signUp(kiln, 'eve');
  t.match(await kiln.api('PUT', '/caches/main/upstreams', { token: eve.token, body: { url: 'http://127.0.0.1/', public_key: upKey } }),
    { status: 403, code: 'forbidden' }, 'the permission check comes first: a stranger learns nothing about addresses');
});

t.test('a destination saved before the list changed is refused at connect time, and sees nothing', async (t) => {
  const { kiln, ada, upKey } = await world(t);
  const receiver = await startReceiver(t);
  const hook = await kiln.api<{ id: string }>('PUT', '/projects/web/webhooks', { token: ada.token, body: { url: 'https://8.8.8.8/hook' } });
  await kiln.sql`update webhooks set url = ${receiver.url} where id = ${hook.message.id}`;
  const ping = await kiln.api<{ status: string; last_response_status: number | null; last_error: string; attempt_log: { error: string; response_status: number | null }[] }>(
    'POST', `/projects/web/webhooks/${hook.message.id}/test`, { token: ada.token });
  t.equal(ping.status, 200);
  t.match(ping.message, { status: 'retrying', last_response_status: null, last_error: /ERR_OUTBOUND_REFUSED: 127\.0\.0\.1 is loopback/ });
  t.match(ping.message.attempt_log, [{ response_status: null, error: /outbound\.allowedNetworks/ }]);

  const upstream = await startReceiver(t);
  await kiln.api('PUT', '/caches/main/upstreams', { token: ada.token, body: { url: 'https://1.1.1.1/cache', public_key: upKey } });
  await kiln.sql`update cache_upstreams set url = ${`http://127.0.0.1:${upstream.port}/cache`}`;
  const narinfo = await fetch(`${kiln.url}/cache/main/${'0'.repeat(32)}.narinfo`);
  t.equal(narinfo.status, 404, 'a refused upstream is a miss');
  t.equal(receiver.requests.length + upstream.requests.length, 0, 'neither the receiver nor the upstream saw a request');
});
