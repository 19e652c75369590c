// A streamed body whose last chunk arrives while uWS is paused (issue 22's upload resets): the
// socket stays paused, with uWS's timeout off, while the handler still works on the body, and it
// is resumed before the answer, so the connection reads its next request. (uWS's resume() arms a
// 10 s timeout that closes the connection under a slower handler; a socket left paused never reads
// the next request and is reset by the idle timeout.)
import t from 'tap';
import pino from 'pino';
import { setTimeout as sleep } from 'node:timers/promises';
import { RouteTable, Router, startHttpServer } from '../../http/index.js';
import type { BodyStream } from '../../http/body.js';
import { RawConnection } from '../support/rawHttp.js';
import { eventually } from '../support/eventually.js';

/** BodyStream's high-water mark: a non-last chunk past it pauses the socket. */
const HIGH_WATER = 4 << 20;
/** Past uWS's HTTP timeout (10 s, checked in 4 s ticks): only real time reaches uWS's timer. */
const SLOW_HANDLER_MS = 14_000;

t.test('a body that ends while paused: the handler may take its time, and the connection serves the next request', async (t) => {
  let stream: BodyStream | null = null;
  let consume = (): void => undefined;
  const consuming = new Promise<void>((resolve) => (consume = resolve));
  let answer = (): void => undefined;
  const answering = new Promise<void>((resolve) => (answer = resolve));
  let consumed = -1;
  const table = new RouteTable<string>();
  const router = new Router<string>(table);
  router.post('/upload', async (req) => {
    stream = req.stream();
    await consuming;
    let n = 0;
    for await (const chunk of stream) n += chunk.byteLength;
    consumed = n;
    await answering;
    return n;
  }, { auth: 'none', body: 'stream', maxBody: 1 << 30 });
  router.get('/next', () => 'next', { auth: 'none' });
  const server = await startHttpServer<string>({
    listenAddr: '127.0.0.1', port: 0, maxRequestSize: 1024, trustedProxies: [], log: pino({ level: 'silent' }), routes: table, anonymous: 'a',
    async authenticate() {
      return 'a';
    },
  });
  t.teardown(() => server.close(100));

  const c = await RawConnection.open(server.port);
  // Exactly the high-water mark first, in chunks (the handler reads nothing yet)...
  const piece = Buffer.alloc(64 << 10, 7);
  const pieces = Array.from({ length: HIGH_WATER / piece.length }, () => Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')]));
  await c.write(Buffer.concat([Buffer.from('POST /upload HTTP/1.1\r\nHost: kiln\r\nTransfer-Encoding: chunked\r\n\r\n'), ...pieces]));
  await eventually(() => stream?.bytesReceived === HIGH_WATER, { message: 'the server read the first 4 MiB' });
  // ...then one byte past it and the end, in one segment: the byte pauses the socket, the end
  // comes in the same read, after the pause.
  await c.write('1\r\nx\r\n0\r\n\r\n');
  await eventually(() => stream?.ended === true, { message: 'the last chunk came' });
  consume();
  await eventually(() => consumed === HIGH_WATER + 1, { message: 'the handler read the body' });
  await sleep(SLOW_HANDLER_MS);
  t.equal(c.closed, false, 'the connection is open while the handler works');
  answer();
  const [first] = await c.responses(1);
  t.equal(first?.status, 200);
  t.same(JSON.parse(first?.body ?? 'null'), { error: false, message: HIGH_WATER + 1 });
  await c.write('GET /next HTTP/1.1\r\nHost: kiln\r\n\r\n');
  const both = await c.responses(2);
  t.equal(both.length, 2, `the next request on the connection is answered (error: ${c.error ?? 'none'})`);
  t.same(JSON.parse(both[1]?.body ?? 'null'), { error: false, message: 'next' });
  c.destroy();
});
