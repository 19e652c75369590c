import http from 'node:http';
import type { LookupAddress } from 'node:dns';
import t, { type Test } from 'tap';
import { createOutboundClient, outboundFetch, type OutboundClientOptions } from '../../../storage/index.js';
import { createWebRequestSender } from '../../../services/events/index.js';

// The connect-time half of outbound.allowedNetworks, on real sockets: what is refused never sees
// a byte, a name is judged by what it resolves to when the socket connects (so a DNS answer that
// changes after the save-time check gains nothing), redirect hops are judged too, and the
// delivery record keeps only a short excerpt of the answer.

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
}

async function server(t: Test, host: string, answer: (req: http.IncomingMessage, res: http.ServerResponse) => void) {
  const seen: Seen[] = [];
  const s = http.createServer((req, res) => {
    seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    req.resume();
    req.on('end', () => answer(req, res));
  });
  await new Promise<void>((resolve) => s.listen(0, host, resolve));
  t.teardown(() => new Promise<void>((resolve) => {
    s.closeAllConnections();
    s.close(() => resolve());
  }));
  return { seen, port: (s.address() as { port: number }).port };
}

function client(t: Test, opts: OutboundClientOptions) {
  const c = createOutboundClient(opts);
  t.teardown(() => c.close());
  return c;
}

const ok = (_req: http.IncomingMessage, res: http.ServerResponse) => res.writeHead(200, { 'content-type': 'text/plain' }).end('thanks');
const post = { body: '{"event":"webhook.ping"}', headers: { 'content-type': 'application/json' } };

/** A resolver that answers each name from a list of answers, the next one on every call. */
function changingDns(answers: Record<string, string[][]>) {
  const calls: string[] = [];
  const resolve = (name: string): Promise<LookupAddress[]> => {
    calls.push(name);
    const list = answers[name];
    if (!list || list.length === 0) return Promise.reject(Object.assign(new Error(`no such name ${name}`), { code: 'ENOTFOUND' }));
    const next = list.length > 1 ? list.shift()! : list[0]!;
    return Promise.resolve(next.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })));
  };
  return { resolve, calls };
}

t.test('by default a loopback receiver is never reached, in any spelling', async (t) => {
  const receiver = await server(t, '127.0.0.1', ok);
  const sender = createWebRequestSender({ client: client(t, { allowedNetworks: [] }), timeoutMs: 5_000 });
  for (const host of ['127.0.0.1', '2130706433', '127.1', '0x7f.0.0.1', 'localhost']) {
    const outcome = await sender.send({ url: `http://${host}:${receiver.port}/hook`, ...post });
    t.equal(outcome.ok, false, host);
    t.match(outcome.error, /^ERR_OUTBOUND_REFUSED: .*(loopback|resolves to)/, `${host}: refused, and says why`);
    t.equal(outcome.status, undefined, `${host}: no status, since nothing answered`);
  }
  t.equal(receiver.seen.length, 0, 'the receiver saw nothing');
});

t.test('a listed network is reached, whatever the spelling of its address', async (t) => {
  const receiver = await server(t, '127.0.0.1', ok);
  const sender = createWebRequestSender({ client: client(t, { allowedNetworks: ['127.0.0.0/8'] }), timeoutMs: 5_000 });
  for (const host of ['127.0.0.1', '2130706433', '127.1']) {
    const outcome = await sender.send({ url: `http://${host}:${receiver.port}/hook`, ...post });
    t.match(outcome, { ok: true, status: 200, excerpt: 'thanks' }, host);
  }
  t.equal(receiver.seen.length, 3);
});

t.test('a name is judged by the addresses the socket connects to (DNS rebinding)', async (t) => {
  const receiver = await server(t, '127.0.0.1', ok);
  const dns = changingDns({
    // public when the webhook is saved, loopback when kiln connects
    'rebind.test': [['93.184.215.14'], ['127.0.0.1']],
    'mixed.test': [['93.184.215.14', '127.0.0.1']],
  });
  const outbound = client(t, { allowedNetworks: [], resolve: dns.resolve });
  t.equal(await outbound.refusalOf(`http://rebind.test:${receiver.port}/hook`), null, 'the save-time check saw a public address');
  const sender = createWebRequestSender({ client: outbound, timeoutMs: 5_000 });
  const rebound = await sender.send({ url: `http://rebind.test:${receiver.port}/hook`, ...post });
  t.match(rebound, { ok: false, error: /^ERR_OUTBOUND_REFUSED: rebind\.test resolves to 127\.0\.0\.1 is loopback/ });
  t.match(await outbound.refusalOf(`http://mixed.test:${receiver.port}/hook`), /mixed\.test resolves to 127\.0\.0\.1/, 'one refused address refuses the name');
  const mixed = await sender.send({ url: `http://mixed.test:${receiver.port}/hook`, ...post });
  t.match(mixed, { ok: false, error: /ERR_OUTBOUND_REFUSED/ });
  t.equal(receiver.seen.length, 0, 'the receiver saw nothing');
  t.ok(dns.calls.filter((n) => n === 'rebind.test').length >= 2, 'the name was resolved again to connect');

  const allowed = client(t, { allowedNetworks: ['127.0.0.0/8'], resolve: changingDns({ 'receiver.test': [['127.0.0.1']] }).resolve });
  const reached = await createWebRequestSender({ client: allowed, timeoutMs: 5_000 }).send({ url: `http://receiver.test:${receiver.port}/hook`, ...post });
  t.match(reached, { ok: true, status: 200 }, 'the socket connects to the address the lookup approved');
  t.equal(receiver.seen[0]?.headers.host, `receiver.test:${receiver.port}`);
});

t.test('the save-time check: literal addresses, resolved names, names that do not resolve yet', async (t) => {
  const outbound = client(t, { allowedNetworks: ['10.20.0.0/16'], resolve: changingDns({ 'metadata.test': [['169.254.169.254']], 'public.test': [['8.8.8.8']] }).resolve });
  t.match(await outbound.refusalOf('http://[::ffff:169.254.169.254]/latest/meta-data/'), /IPv4-mapped 169\.254\.169\.254, link-local/);
  t.match(await outbound.refusalOf('http://0/'), /"this network"/);
  t.match(await outbound.refusalOf('http://metadata.test/'), /^metadata\.test resolves to 169\.254\.169\.254 is link-local/);
  t.equal(await outbound.refusalOf('http://10.20.0.7:8080/hook'), null, 'a listed network');
  t.equal(await outbound.refusalOf('https://public.test/hook'), null);
  t.equal(await outbound.refusalOf('https://nowhere.test/hook'), null, 'a name without addresses is left to the connect-time check');
});

t.test('connectableAddresses: the addresses another program (ssh) is given instead of the name', async (t) => {
  const outbound = client(t, { allowedNetworks: ['127.0.0.0/8'], resolve: changingDns({ 'box.test': [['127.0.0.2', '127.0.0.2'], ['10.9.9.9']], 'mixed.test': [['127.0.0.1', '10.0.0.1']] }).resolve });
  t.same(await outbound.connectableAddresses('box.test'), { addresses: ['127.0.0.2'] }, 'checked, once each');
  t.match(await outbound.connectableAddresses('box.test'), { refusal: /^box\.test resolves to 10\.9\.9\.9/ }, 'resolved again: rebound to a refused address');
  t.match(await outbound.connectableAddresses('mixed.test'), { refusal: /10\.0\.0\.1/ }, 'one refused address refuses the name');
  t.match(await outbound.connectableAddresses('nowhere.test'), { refusal: 'nowhere.test does not resolve' }, 'no address: nothing to connect to');
  t.same(await outbound.connectableAddresses('127.0.0.1'), { addresses: ['127.0.0.1'] });
  t.same(await outbound.connectableAddresses('[::ffff:127.0.0.1]'), { addresses: ['::ffff:127.0.0.1'] });
  t.match(await outbound.connectableAddresses('169.254.169.254'), { refusal: /link-local/ });
});

t.test('upstream fetch: every redirect hop is checked, credentials stay with their origin', async (t) => {
  const second = await server(t, '127.0.0.2', ok);
  const first = await server(t, '127.0.0.1', (req, res) => {
    if (req.url === '/away') res.writeHead(302, { location: `http://127.0.0.2:${second.port}/there` }).end();
    else if (req.url === '/home') res.writeHead(301, { location: '/here' }).end();
    else if (req.url === '/range') res.writeHead(206, { 'content-range': 'bytes 0-1/6', 'content-length': '2' }).end('th');
    else res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '6' }).end('thanks');
  });
  const onlyFirst = outboundFetch(client(t, { allowedNetworks: ['127.0.0.1/32'] }));
  await t.rejects(onlyFirst(`http://127.0.0.1:${first.port}/away`), { code: 'ERR_OUTBOUND_REFUSED', message: /127\.0\.0\.2 is loopback/ });
  t.equal(second.seen.length, 0, 'the redirect target on a refused address saw nothing');

  const home = await onlyFirst(`http://127.0.0.1:${first.port}/home`, { headers: { Authorization: 'Bearer up' } });
  t.equal(home.status, 200);
  t.equal(await home.text(), 'thanks');
  t.equal(first.seen.at(-1)?.headers.authorization, 'Bearer up', 'same origin: credentials kept');
  const head = await onlyFirst(`http://127.0.0.1:${first.port}/file`, { method: 'HEAD' });
  t.equal(head.headers.get('content-length'), '6');
  const range = await onlyFirst(`http://127.0.0.1:${first.port}/range`);
  t.equal(range.status, 206);
  t.equal(await range.text(), 'th');

  const both = outboundFetch(client(t, { allowedNetworks: ['127.0.0.0/8'] }));
  const moved = await both(`http://127.0.0.1:${first.port}/away`, { headers: { Authorization: 'Bearer up' } });
  t.equal(await moved.text(), 'thanks');
  t.equal(second.seen.length, 1);
  t.equal(second.seen[0]?.headers.authorization, undefined, 'another origin: credentials dropped');

  const none = outboundFetch(client(t, { allowedNetworks: [] }));
  await t.rejects(none(`http://127.0.0.1:${first.port}/file`), { code: 'ERR_OUTBOUND_REFUSED' });
});

t.test('the delivery record keeps the status and a short excerpt, no more', async (t) => {
  const chatty = await server(t, '127.0.0.1', (_req, res) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`${'x'.repeat(255)}é${'secret'.repeat(1000)}`));
  const sender = createWebRequestSender({ client: client(t, { allowedNetworks: ['127.0.0.0/8'] }), timeoutMs: 5_000 });
  const outcome = await sender.send({ url: `http://127.0.0.1:${chatty.port}/hook`, ...post });
  t.match(outcome, { ok: false, status: 500 });
  t.equal(outcome.excerpt, 'x'.repeat(255), 'at most 256 bytes, without half a character');
});
