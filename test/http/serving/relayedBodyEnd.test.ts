// The relay's half of issue 22's upload resets (docs/http.md, "Uploads reset 8–12 s after they were
// sent"): a serving thread pauses the client's socket when the loopback request's buffer is full,
// and uWS still hands over the chunks it already read, the body's end included. node:http never
// emits 'drain' after end(), so a relay that resumed only on 'drain' left the socket paused after
// the answer: the connection's next request was never read, and uWS's idle timeout reset it.
// Deterministic here: the relay's loopback buffer is 1 KiB (ForwardOrigin.highWaterMark; node:http
// holds what is written before the loopback socket is attached), so a request of one small segment
// pauses on its first chunk and ends in the same read. The origin is kiln's own HTTP server, as the
// main thread's loopback listener is.
import { randomBytes } from 'node:crypto';
import t from 'tap';
import pino from 'pino';
import uWS from 'uWebSockets.js';
import { RouteTable, Router, startHttpServer } from '../../../http/index.js';
import { forwardHttp, originAgent, type ForwardOrigin } from '../../../http/serving/forwardHttp.js';
import { RawConnection } from '../../support/rawHttp.js';

const RELAY_HIGH_WATER = 1024;
const chunk = (bytes: Buffer): Buffer => Buffer.concat([Buffer.from(`${bytes.length.toString(16)}\r\n`), bytes, Buffer.from('\r\n')]);

t.test('a relayed body that ends while the client is paused: the connection serves the next request', async (t) => {
  const table = new RouteTable<string>();
  const router = new Router<string>(table);
  router.post('/upload', async (req) => {
    let n = 0;
    for await (const piece of req.stream()) n += piece.byteLength;
    return n;
  }, { auth: 'none', body: 'stream', maxBody: 1 << 20 });
  router.get('/next', () => 'next', { auth: 'none' });
  const main = await startHttpServer<string>({
    listenAddr: '127.0.0.1', port: 0, maxRequestSize: 1024, trustedProxies: [], log: pino({ level: 'silent' }), routes: table, anonymous: 'a',
    async authenticate() {
      return 'a';
    },
  });
  t.teardown(() => main.close(100));

  const origin: ForwardOrigin = { port: main.port, secret: randomBytes(16).toString('hex'), agent: originAgent(), highWaterMark: RELAY_HIGH_WATER };
  const relay = uWS.App().any('/*', (res, req) => forwardHttp(res, req, origin));
  const listen = await new Promise<uWS.us_listen_socket>((resolve, reject) => relay.listen('127.0.0.1', 0, (s) => (s ? resolve(s) : reject(new Error('relay cannot listen')))));
  t.teardown(() => {
    uWS.us_listen_socket_close(listen);
    origin.agent.destroy();
  });

  const c = await RawConnection.open(uWS.us_socket_local_port(listen as unknown as uWS.us_socket));
  // Two chunks past the relay's buffer and the end, in one write of a few KiB: one segment, one
  // read. The first chunk pauses the client's socket; the second and the end arrive after the pause.
  const body = [randomBytes(2048), randomBytes(2048)];
  await c.write(Buffer.concat([Buffer.from('POST /upload HTTP/1.1\r\nHost: kiln\r\nTransfer-Encoding: chunked\r\n\r\n'), ...body.map(chunk), Buffer.from('0\r\n\r\n')]));
  const [first] = await c.responses(1);
  t.equal(first?.status, 200);
  t.same(JSON.parse(first?.body ?? 'null'), { error: false, message: 4096 }, 'the whole body reached the main thread');
  await c.write('GET /next HTTP/1.1\r\nHost: kiln\r\n\r\n');
  // Without the fix the socket stays paused: uWS's idle timeout (10 s) closes it unanswered.
  const both = await c.responses(2);
  t.equal(both.length, 2, `the next request on the connection is answered (error: ${c.error ?? 'none'}, closed: ${c.closed})`);
  t.same(JSON.parse(both[1]?.body ?? 'null'), { error: false, message: 'next' });
  c.destroy();
});
