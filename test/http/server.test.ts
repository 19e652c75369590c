import t from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import { EventEmitter, once } from 'node:events';
import { connect } from 'node:net';
import pino from 'pino';
import { z } from 'zod';
import { ApiError } from '../../protocol/index.js';
import { RouteTable, Router, startHttpServer, streamReply, bytesReply } from '../../http/index.js';

const log = pino({ level: 'silent' });
/** says 'waiting' when a /later handler has begun its wait, so a test can leave at that point */
const laterHandlers = new EventEmitter();

async function start(t: { teardown(fn: () => unknown): void }, maxRequestSize = 1024) {
  const table = new RouteTable<string>();
  const api = new Router<string>(table).scope('/api/v1');
  api.get('/hello/:name', (req) => ({ hi: req.param('name'), who: req.principal, q: req.searchParams.get('q') }), { auth: 'none' });
  api.put('/things', async (req) => req.body(z.object({ name: z.string(), size: z.number().int() })), { auth: 'none' });
  api.get('/secret', () => 'classified');
  api.get('/boom', () => {
    throw new Error('database exploded at /var/secret/path');
  }, { auth: 'none' });
  api.get('/later/:n', async (req) => {
    laterHandlers.emit('waiting');
    await new Promise((r) => setTimeout(r, 20));
    if (req.param('n') === 'fail') throw new ApiError('repository_unavailable', 'refused after a wait');
    return { n: req.param('n'), who: req.principal };
  }, { auth: 'none' });
  api.get('/teapot', () => {
    throw new ApiError('cache_exists', 'cache "main" exists');
  }, { auth: 'none' });
  api.post('/upload', async (req) => {
    let n = 0;
    for await (const chunk of req.stream()) n += chunk.byteLength;
    return n;
  }, { auth: 'none', body: 'stream', maxBody: 10 << 20 });
  api.put('/digest', async (req) => {
    // Each piece is used up before the next is asked for, as a reusing body requires.
    const hash = createHash('sha256');
    let pieces = 0;
    for await (const piece of req.stream()) {
      hash.update(piece);
      pieces++;
    }
    return { sha256: hash.digest('hex'), pieces, reused: req.stream().reusesPieces };
  }, { auth: 'none', body: 'stream', maxBody: 64 << 20, reuseBodyPieces: true });
  const big = Buffer.alloc(8 << 20, 7);
  api.get('/big', () => streamReply(200, big.length, (async function* () {
    for (let i = 0; i < big.length; i += 65536) yield big.subarray(i, i + 65536);
  })(), { 'Content-Type': 'application/octet-stream' }), { auth: 'none' });
  new Router<string>(table).get('/cache/:cache/:hash.narinfo', (req) => bytesReply(200, `${req.param('cache')}:${req.param('hash')}`, { 'Content-Type': 'text/x-nix-narinfo' }), { auth: 'none' });
  const server = await startHttpServer<string>({
    listenAddr: '127.0.0.1', port: 0, maxRequestSize, trustedProxies: ['127.0.0.1/8'], log, routes: table, anonymous: 'anonymous',
    async authenticate(req, mode) {
      const header = req.header('authorization');
      if (mode === 'required' && header !== 'Bearer good') throw new ApiError('unauthorized', 'a bearer token is required');
      return header ? 'ada' : 'anonymous';
    },
  });
  t.teardown(() => server.close(100));
  return `http://127.0.0.1:${server.port}`;
}

t.test('routing, envelope and errors', async (t) => {
  const base = await start(t);
  const get = async (path: string, init?: RequestInit) => {
    const res = await fetch(base + path, init);
    return { status: res.status, headers: res.headers, body: await res.json() as Record<string, unknown> };
  };
  t.same((await get('/api/v1/hello/a%20b?q=1')).body, { error: false, message: { hi: 'a b', who: 'anonymous', q: '1' } });
  const missing = await get('/api/v1/nope');
  t.equal(missing.status, 404);
  t.same(missing.body, { error: true, message: 'no route for GET /api/v1/nope', code: 'not_found' });
  const wrong = await get('/api/v1/things', { method: 'POST', body: '{}' });
  t.equal(wrong.status, 405);
  t.equal(wrong.headers.get('allow'), 'PUT');
  const bad = await get('/api/v1/things', { method: 'PUT', body: '{"name": "x",' });
  t.equal(bad.status, 400);
  t.equal(bad.body.code, 'invalid_json');
  t.match(bad.body.message, /not valid JSON/);
  const field = await get('/api/v1/things', { method: 'PUT', body: '{"name": "x", "size": "big"}' });
  t.equal(field.status, 400);
  t.match(field.body.message, /^size: /);
  t.same((await get('/api/v1/things', { method: 'PUT', body: '{"name":"x","size":3}' })).body.message, { name: 'x', size: 3 });
  const large = await get('/api/v1/things', { method: 'PUT', body: JSON.stringify({ name: 'x'.repeat(2000), size: 1 }) });
  t.equal(large.status, 413);
  t.equal(large.body.code, 'body_too_large');
  const unauth = await get('/api/v1/secret');
  t.equal(unauth.status, 401);
  t.equal((await get('/api/v1/secret', { headers: { authorization: 'Bearer good' } })).body.message, 'classified');
  const boom = await get('/api/v1/boom');
  t.equal(boom.status, 500);
  t.notMatch(JSON.stringify(boom.body), /exploded|secret|at /, 'no internals leak');
  const conflict = await get('/api/v1/teapot');
  t.same([conflict.status, conflict.body.code], [409, 'cache_exists']);
  // A credential-free route answers at once when its handler does, and still waits when it awaits.
  t.same((await get('/api/v1/later/7', { headers: { authorization: 'Bearer good' } })).body.message, { n: '7', who: 'anonymous' });
  const late = await get('/api/v1/later/fail');
  t.same([late.status, late.body.code], [422, 'repository_unavailable']);
  const gone = new AbortController();
  const waiting = once(laterHandlers, 'waiting');
  const abandoned = fetch(base + '/api/v1/later/x', { signal: gone.signal }).catch((e: Error) => e.name);
  await waiting;
  gone.abort();
  t.equal(await abandoned, 'AbortError', 'a client that leaves while the handler waits costs nothing');
  t.equal((await get('/api/v1/hello/after')).status, 200, 'and the server goes on');
  const badEscape = await fetch(base + '/api/v1/hello/%E0%A4%A');
  t.equal(badEscape.status, 400);
});

t.test('suffix params, HEAD and streams', async (t) => {
  const base = await start(t);
  const narinfo = await fetch(`${base}/cache/main/abc.narinfo`);
  t.equal(await narinfo.text(), 'main:abc');
  const head = await fetch(`${base}/cache/main/abc.narinfo`, { method: 'HEAD' });
  t.equal(head.status, 200);
  t.equal(head.headers.get('content-length'), '8');
  t.equal((await fetch(`${base}/cache/main/abc.ls`)).status, 404);
  const big = await fetch(`${base}/api/v1/big`);
  const bytes = Buffer.from(await big.arrayBuffer());
  t.equal(bytes.length, 8 << 20);
  t.ok(bytes.every((b) => b === 7));
  const up = await fetch(`${base}/api/v1/upload`, { method: 'POST', body: Buffer.alloc(3 << 20, 1) });
  t.same(await up.json(), { error: false, message: 3 << 20 });
  // Two large bodies at once through reused slabs, then again (slabs handed back are taken up again).
  for (let round = 0; round < 2; round++) {
    const bodies = [randomBytes((5 << 20) + 12345), randomBytes((3 << 20) + 1)];
    const answers = await Promise.all(bodies.map(async (b) => (await (await fetch(`${base}/api/v1/digest`, { method: 'PUT', body: b })).json()) as { message: { sha256: string; pieces: number; reused: boolean } }));
    answers.forEach((answer, i) => {
      t.equal(answer.message.sha256, createHash('sha256').update(bodies[i]!).digest('hex'), `round ${round}: body ${i} arrives intact through reused slabs`);
      t.ok(answer.message.reused && answer.message.pieces <= Math.ceil(bodies[i]!.length / (1 << 20)), `in ${answer.message.pieces} whole slabs and a rest`);
    });
  }
  // docs/http.md: a declared length within 64 MiB is answered 413 at once and the rest of the body
  // read and dropped, so a client still writing reads the answer instead of a reset connection.
  const over = await fetch(`${base}/api/v1/upload`, { method: 'POST', body: Buffer.alloc(11 << 20, 1) });
  t.equal(over.status, 413, 'an oversized stream is answered, not cut off');
  t.equal(((await over.json()) as { code: string }).code, 'body_too_large');
});

t.test('lanes answer GETs from uWS router first and hand the rest on to the routes', async (t) => {
  const table = new RouteTable<string>();
  const r = new Router<string>(table).scope('/lane/:group');
  const seen: string[][] = [];
  r.lane('/:item', (params, header) => {
    seen.push([...params]);
    if (params[1] === 'throws') throw new Error('lane fault');
    if (params[1] !== 'fast' || header('x-slow') !== '') return undefined;
    return bytesReply(200, `lane ${params[0]}`, { 'X-From': 'lane' });
  });
  r.get('/:item', (req) => bytesReply(200, `route ${req.param('group')} ${req.param('item')}`, { 'X-From': 'route' }), { auth: 'none' });
  t.throws(() => r.lane('/:item.narinfo', () => undefined), /whole segments/, 'a suffix pattern is refused');
  const server = await startHttpServer<string>({
    listenAddr: '127.0.0.1', port: 0, maxRequestSize: 1024, trustedProxies: [], log, routes: table, anonymous: 'anonymous',
    async authenticate() {
      return 'anonymous';
    },
  });
  t.teardown(() => server.close(100));
  const base = `http://127.0.0.1:${server.port}`;
  const get = async (path: string, init: RequestInit = {}) => {
    const res = await fetch(base + path, init);
    return { status: res.status, from: res.headers.get('x-from'), body: await res.text() };
  };
  t.same(await get('/lane/a/fast'), { status: 200, from: 'lane', body: 'lane a' }, 'answered by the lane');
  t.same(await get('/lane/a/slow'), { status: 200, from: 'route', body: 'route a slow' }, 'handed on to the route');
  t.same(await get('/lane/a/fast', { headers: { 'x-slow': '1' } }), { status: 200, from: 'route', body: 'route a fast' }, 'the lane reads headers');
  t.same(await get('/lane/a/throws'), { status: 200, from: 'route', body: 'route a throws' }, 'a lane that throws hands on');
  t.same(await get('/lane/a%20b/fast'), { status: 200, from: 'lane', body: 'lane a%20b' }, 'lane parameters are undecoded');
  const head = await fetch(`${base}/lane/a/fast`, { method: 'HEAD' });
  t.equal(head.headers.get('x-from'), 'route', 'HEAD goes to the routes');
  t.equal((await get('/lane/a/fast/deeper')).status, 404, 'a longer path is not the lane');
  t.equal(seen.length, 5, 'neither the HEAD nor the longer path reached the lane');
});

t.test('HEAD answers keep the connection open', async (t) => {
  const base = await start(t);
  const socket = connect(Number(new URL(base).port), '127.0.0.1');
  await once(socket, 'connect');
  t.teardown(() => socket.destroy());
  let received = '';
  socket.on('data', (d: Buffer) => {
    received += d.toString('latin1');
  });
  const closed = once(socket, 'close').then(() => true);
  const answer = async (request: string) => {
    received = '';
    socket.write(request);
    while (!received.includes('\r\n\r\n')) {
      if (await Promise.race([once(socket, 'data').then(() => false), closed])) return `closed after: ${received}`;
    }
    return received;
  };
  // A sync answer, an async one, a streamed one and an error, each twice on the one connection.
  for (const path of ['/cache/main/abc.narinfo', '/api/v1/later/1', '/api/v1/big', '/api/v1/nope', '/cache/main/abc.narinfo']) {
    const head = await answer(`HEAD ${path} HTTP/1.1\r\nHost: kiln\r\n\r\n`);
    t.match(head, /^HTTP\/1\.1 (200|404) [^\r]*\r\n/, `HEAD ${path} answered on the same connection`);
    t.match(head, /\r\nContent-Length: \d+\r\n/i, 'with the length a GET would send');
    t.notOk(head.includes('\r\n\r\n{'), 'and no body');
  }
  const get = await answer('GET /api/v1/hello/x HTTP/1.1\r\nHost: kiln\r\n\r\n');
  t.match(get, /^HTTP\/1\.1 200 /, 'a GET after them still gets its answer');
});
