// A request refused while its body is still coming (413 without Expect: 100-continue, or an error
// before the handler read the body): the client must be able to finish writing and read the answer
// (RFC 9112 §9.6), not get EPIPE from a reset; and the draining is bounded.
import t, { type Test } from 'tap';
import pino from 'pino';
import { ApiError } from '../../protocol/index.js';
import { RouteTable, Router, startHttpServer } from '../../http/index.js';
import { RawConnection } from '../support/rawHttp.js';

const DRAIN_BYTES = 32 << 20;

async function start(t: Test) {
  const table = new RouteTable<string>();
  const r = new Router<string>(table);
  r.get('/hello', () => 'hi', { auth: 'none' });
  r.put('/json', async (req) => (await req.bytes()).length, { auth: 'none' });
  r.post('/upload', async (req) => {
    let n = 0;
    for await (const chunk of req.stream()) n += chunk.byteLength;
    return n;
  }, { auth: 'none', body: 'stream', maxBody: 64 << 10 });
  r.post('/refuse', () => {
    throw new ApiError('cache_exists', 'refused before reading the body');
  }, { auth: 'none', body: 'stream', maxBody: 1 << 30 });
  // The drain's clock: timers fire only when the test says so.
  const timers: (() => void)[] = [];
  const server = await startHttpServer<string>({
    listenAddr: '127.0.0.1', port: 0, maxRequestSize: 1024, trustedProxies: [], log: pino({ level: 'silent' }), routes: table, anonymous: 'a',
    async authenticate() {
      return 'a';
    },
    drain: { bytes: DRAIN_BYTES, ms: 5_000, timer: (fn) => (timers.push(fn), () => timers.splice(timers.indexOf(fn) >>> 0, 1)) },
  });
  t.teardown(() => server.close(100));
  const open = async () => {
    const c = await RawConnection.open(server.port);
    t.teardown(() => c.destroy());
    return c;
  };
  return { open, timers };
}

const head = (method: string, path: string, extra: string) => `${method} ${path} HTTP/1.1\r\nHost: kiln\r\n${extra}\r\n`;
const HELLO = head('GET', '/hello', '');

t.test('a body over http.maxRequestSize sent whole is drained: the client finishes writing and reads the 413', async (t) => {
  const { open } = await start(t);
  const size = 24 << 20; // more than the two sockets' buffers hold
  const c = await open();
  const written = await c.write(Buffer.concat([Buffer.from(head('PUT', '/json', `Content-Length: ${size}\r\n`)), Buffer.alloc(size, 7)]));
  t.equal(written, null, 'the whole body was written (no EPIPE or reset)');
  const [refused] = await c.responses(1);
  t.equal(refused?.status, 413);
  t.match(JSON.parse(refused?.body ?? '{}'), { error: true, code: 'body_too_large', message: /limit of 1024 bytes \(http\.maxRequestSize\)/ });
  t.equal(c.error, null, 'no reset');
  await c.write(HELLO);
  const [, after] = await c.responses(2);
  t.equal(after?.status, 200, 'the drained connection goes on serving');
});

t.test('a streamed upload declared over its limit is drained the same way', async (t) => {
  const { open } = await start(t);
  const size = 2 << 20;
  const c = await open();
  t.equal(await c.write(Buffer.concat([Buffer.from(head('POST', '/upload', `Content-Length: ${size}\r\n`)), Buffer.alloc(size, 1)])), null);
  const [refused] = await c.responses(1);
  t.equal(refused?.status, 413);
  t.match(refused?.body, /request body of 2097152 bytes exceeds the limit of 65536 bytes/);
  await c.write(HELLO);
  t.equal((await c.responses(2))[1]?.status, 200);
});

t.test('an error before the handler read a streamed body is drained too', async (t) => {
  const { open } = await start(t);
  const size = 3 << 20;
  const c = await open();
  t.equal(await c.write(Buffer.concat([Buffer.from(head('POST', '/refuse', `Content-Length: ${size}\r\n`)), Buffer.alloc(size, 1)])), null);
  const [refused] = await c.responses(1);
  t.same([refused?.status, JSON.parse(refused?.body ?? '{}').code], [409, 'cache_exists']);
  await c.write(HELLO);
  t.equal((await c.responses(2))[1]?.status, 200);
});

t.test('a chunked body that passes the limit mid-way gets its 413 whole once the body ends', async (t) => {
  const { open } = await start(t);
  const c = await open();
  const chunk = Buffer.alloc(16 << 10, 2);
  const chunks: Buffer[] = [Buffer.from(head('POST', '/upload', 'Transfer-Encoding: chunked\r\n'))];
  for (let i = 0; i < 64; i++) chunks.push(Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n'));
  chunks.push(Buffer.from('0\r\n\r\n'));
  t.equal(await c.write(Buffer.concat(chunks)), null, 'a 1 MiB body, 64 KiB allowed');
  const [refused] = await c.responses(1);
  t.equal(refused?.status, 413);
  t.equal(JSON.parse(refused?.body ?? '{}').code, 'body_too_large');
  await c.write(HELLO);
  t.equal((await c.responses(2))[1]?.status, 200, 'the connection is still in step');
});

t.test('draining is bounded: past the byte bound the connection closes', async (t) => {
  const { open } = await start(t);
  const c = await open();
  // Declares 1 GiB: far past the bound, so the answer is written and held while bytes are dropped.
  await c.write(head('POST', '/upload', `Content-Length: ${1 << 30}\r\n`));
  await c.until(() => c.received.includes('body_too_large'));
  t.match(c.received.toString(), /^HTTP\/1\.1 413 /, 'the answer comes before the body');
  const piece = Buffer.alloc(256 << 10, 3);
  let sent = 0;
  while (!c.closed && (await c.write(piece)) === null) sent += piece.length;
  await c.until(() => c.closed);
  t.ok(c.closed, 'the server closed the connection');
  // What the client got written is what kiln dropped plus the two sockets' buffers.
  t.ok(sent < DRAIN_BYTES + (32 << 20), `closed after ${sent} bytes, not at the declared 1 GiB`);
});

t.test('draining is bounded in time: a client that stops sending is closed when the clock says so', async (t) => {
  const { open, timers } = await start(t);
  const c = await open();
  await c.write(Buffer.concat([Buffer.from(head('POST', '/upload', `Content-Length: ${1 << 30}\r\n`)), Buffer.alloc(100 << 10, 4)]));
  await c.until(() => c.received.includes('body_too_large'));
  t.equal(timers.length, 1, 'one drain timer runs');
  t.notOk(c.closed, 'the connection waits for the rest of the body');
  timers[0]!();
  await c.until(() => c.closed);
  t.ok(c.closed, 'and closes when the time is up');
});
