// A request whose body could end in two places (two different Content-Length headers, a
// Transfer-Encoding other than chunked) is 400 invalid_framing and the connection closes: uWS would
// read one of the lengths, a proxy in front the other, and the leftover bytes become a smuggled request.
import t, { type Test } from 'tap';
import pino from 'pino';
import { RouteTable, Router, startHttpServer, bytesReply } from '../../http/index.js';
import { requestFraming } from '../../http/framing.js';
import { RawConnection } from '../support/rawHttp.js';

async function start(t: Test) {
  const table = new RouteTable<string>();
  const r = new Router<string>(table);
  r.get('/hello', () => 'hi', { auth: 'none' });
  r.lane('/fast', () => bytesReply(200, 'lane'));
  r.get('/fast', () => 'route', { auth: 'none' });
  r.put('/echo', async (req) => (await req.bytes()).toString(), { auth: 'none' });
  r.post('/upload', async (req) => {
    let n = 0;
    for await (const chunk of req.stream()) n += chunk.byteLength;
    return n;
  }, { auth: 'none', body: 'stream' });
  const server = await startHttpServer<string>({
    listenAddr: '127.0.0.1', port: 0, maxRequestSize: 1024, trustedProxies: [], log: pino({ level: 'silent' }), routes: table, anonymous: 'a',
    async authenticate() {
      return 'a';
    },
  });
  t.teardown(() => server.close(100));
  return async (request: string) => {
    const c = await RawConnection.open(server.port);
    t.teardown(() => c.destroy());
    await c.write(request);
    const [answer] = await c.responses(1);
    // A pipelined GET behind it tells whether the connection went on.
    await c.write('GET /hello HTTP/1.1\r\nHost: kiln\r\n\r\n');
    await c.until(() => c.closed || (c.received.toString().match(/HTTP\/1\.1 /g) ?? []).length >= 2);
    return { answer, closed: c.closed };
  };
}

t.test('ambiguous framing is 400 invalid_framing naming the problem, and the connection closes', async (t) => {
  const send = await start(t);
  for (const [what, request, problem] of [
    ['two different Content-Length headers', 'PUT /echo HTTP/1.1\r\nHost: kiln\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc', /different Content-Length headers \(2, 3\)/],
    ['two different Content-Length headers on a streamed route', 'POST /upload HTTP/1.1\r\nHost: kiln\r\nContent-Length: 5\r\nContent-Length: 1\r\n\r\nabcde', /different Content-Length headers \(5, 1\)/],
    ['two different Content-Length headers on a GET', 'GET /hello HTTP/1.1\r\nHost: kiln\r\nContent-Length: 0\r\nContent-Length: 1\r\n\r\n', /different Content-Length headers \(0, 1\)/],
    ['Transfer-Encoding: gzip', 'PUT /echo HTTP/1.1\r\nHost: kiln\r\nTransfer-Encoding: gzip\r\n\r\nabc', /Transfer-Encoding "gzip" is not supported/],
    ['Transfer-Encoding: gzip, chunked', 'PUT /echo HTTP/1.1\r\nHost: kiln\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n', /Transfer-Encoding "gzip, chunked" is not supported/],
    ['chunked twice', 'PUT /echo HTTP/1.1\r\nHost: kiln\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n', /Transfer-Encoding "chunked, chunked" is not supported/],
    ['Transfer-Encoding on a GET', 'GET /hello HTTP/1.1\r\nHost: kiln\r\nTransfer-Encoding: gzip\r\n\r\n', /Transfer-Encoding "gzip"/],
    ['Transfer-Encoding on a GET a lane answers', 'GET /fast HTTP/1.1\r\nHost: kiln\r\nTransfer-Encoding: identity\r\n\r\n', /Transfer-Encoding "identity"/],
  ] as const) {
    const { answer, closed } = await send(request);
    t.equal(answer?.status, 400, `${what}: 400`);
    t.match(JSON.parse(answer?.body ?? '{}'), { error: true, code: 'invalid_framing', message: problem }, `${what}: the body names the problem`);
    t.ok(closed, `${what}: the connection closes`);
  }
});

t.test('plain framing still works: one length, repeats of one length, chunked in any case', async (t) => {
  const send = await start(t);
  for (const [what, request, body] of [
    ['one Content-Length', 'PUT /echo HTTP/1.1\r\nHost: kiln\r\nContent-Length: 3\r\n\r\nabc', 'abc'],
    ['the same Content-Length twice', 'PUT /echo HTTP/1.1\r\nHost: kiln\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc', 'abc'],
    ['chunked', 'PUT /echo HTTP/1.1\r\nHost: kiln\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n', 'abc'],
    ['Chunked', 'PUT /echo HTTP/1.1\r\nHost: kiln\r\nTransfer-Encoding: Chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n', 'abc'],
  ] as const) {
    const { answer, closed } = await send(request);
    t.equal(answer?.status, 200, `${what}: 200`);
    t.same(JSON.parse(answer?.body ?? '{}'), { error: false, message: body });
    t.notOk(closed, `${what}: the connection goes on`);
  }
  const lane = await send('GET /fast HTTP/1.1\r\nHost: kiln\r\n\r\n');
  t.equal(lane.answer?.body, 'lane', 'a GET without framing headers still takes the lane');
});

t.test('requestFraming reads one length or refuses', async (t) => {
  t.same(requestFraming(undefined, undefined), { ok: true, length: null });
  t.same(requestFraming('12', undefined), { ok: true, length: 12 });
  t.same(requestFraming('12, 12', undefined), { ok: true, length: 12 });
  t.same(requestFraming(undefined, ' CHUNKED '), { ok: true, length: null });
  t.match(requestFraming('1, 2', undefined), { ok: false, problem: /different Content-Length/ });
  t.match(requestFraming('-1', undefined), { ok: false, problem: /not a byte count/ });
  t.match(requestFraming('1e3', undefined), { ok: false, problem: /not a byte count/ });
  t.match(requestFraming('', undefined), { ok: false, problem: /not a byte count/ });
  t.match(requestFraming('3', 'chunked'), { ok: false, problem: /both Content-Length and Transfer-Encoding/ });
  t.match(requestFraming(undefined, 'chunked, gzip'), { ok: false, problem: /not supported/ });
  const long = requestFraming(undefined, 'x'.repeat(5000));
  t.ok(!long.ok && long.problem.length < 200, 'a long header is cut short in the message');
});
