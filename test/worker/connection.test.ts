// The worker's /proto client in-process against the test server: handshake endings, garbage and
// oversize frames from the server, and NAR pushes under the server's credit with real store paths.
import t from 'tap';
import { randomBytes, randomUUID } from 'node:crypto';
import { Packr } from 'msgpackr';
import { pino } from 'pino';
import WebSocket from 'ws';
import { encodeMessage, parsePeersFile, toNix32Hash, type PeerTokens, type WorkerHello } from '../../protocol/index.js';
import { connect } from '../../worker/connection.js';
import { NarPusher } from '../../worker/narPusher.js';
import { insecureListenerProblem, insecureTransportProblem } from '../../worker/index.js';
import { buildFixturePaths, nixPathInfo } from '../support/nixStore.js';
import { startProtoServer } from '../support/protoServer.js';

const log = pino({ level: 'silent' });
const project = randomUUID();
const token = randomBytes(48).toString('base64url');
const peers = (text: string): PeerTokens => {
  const parsed = parsePeersFile(text);
  if (!parsed.ok) throw new Error(parsed.reason);
  return parsed.value;
};
const hello: WorkerHello = {
  workerId: randomUUID(), software: 'kiln test', capabilities: { eval: false, build: true, fetch: false, federate: false },
  architectures: ['x86_64-linux'], systemFeatures: [], maxConcurrentBuilds: 1, maxConcurrentEvals: 1, cpuCores: 1, cpuCoreScore: null,
  memoryBytes: 1 << 30, zone: 'test',
};
const load = () => ({ runningBuilds: 0, runningEvals: 0, load1: 0, memoryFreeBytes: 1, memoryTotalBytes: 2, storeFreeBytes: null });

t.test('handshake outcomes', async (t) => {
  const server = await startProtoServer({ tokens: { [project]: [token] } });
  t.teardown(() => server.close());
  const connection = await connect({ url: server.url, hello, peers: peers(`${project}:${token}`), log, load });
  const session = await server.nextWorker();
  t.same(connection.welcome.projects, [project]);
  t.equal(session.hello.zone, 'test');
  const beat = await session.next('heartbeat');
  t.equal(beat.seq, 0, 'heartbeats start at welcome.limits.heartbeatIntervalSecs');
  connection.close('shutting_down', 'test over');
  t.match(await connection.closed, { code: 1001, reason: /^shutting_down: test over/ });

  const refused = connect({ url: server.url, hello, peers: peers(`*:${randomBytes(48).toString('base64url')}`), log, load });
  await t.rejects(refused, { name: 'HandshakeRejected', code: 'bad_token' });
  await t.rejects(connect({ url: 'ws://127.0.0.1:1/proto', hello, peers: null, log, load }), /cannot connect to ws:\/\/127\.0\.0\.1:1\/proto/);
});

t.test('what the server sends wrong, the worker closes on with a reason', async (t) => {
  const server = await startProtoServer({ openModeProjects: [], limits: { maxMessageBytes: 64 * 1024 } });
  t.teardown(() => server.close());
  const cases: [string, (s: Awaited<ReturnType<typeof server.nextWorker>>) => void, number, RegExp][] = [
    ['a text frame', (s) => s.sendRaw('hello'), 4002, /^malformed_message: text frames/],
    ['another protocol version', (s) => s.sendRaw(new Packr({ useRecords: false }).pack({ v: 1, t: 'heartbeatAck', seq: 0 })), 4001, /^unsupported_version: v: version 1/],
    ['a frame over the cap', (s) => s.sendRaw(Buffer.alloc(70 * 1024)), 1009, /^message_too_large: frame: the frame is \d+ bytes, over the cap of 65536/],
    ['a worker\'s message', (s) => s.sendRaw(encodeMessage({ t: 'jobAccepted', jobId: 'x' })), 4004, /^unexpected_message: jobAccepted is a worker's message/],
    ['a reject', (s) => s.send({ t: 'reject', code: 'server_full', reason: 'no room' }), 1013, /^server_full: no room/],
  ];
  for (const [name, misbehave, code, reason] of cases) {
    const connection = await connect({ url: server.url, hello, peers: null, log, load });
    const session = await server.nextWorker();
    misbehave(session);
    const closed = await connection.closed;
    t.equal(closed.code, code, `${name}: close code`);
    t.match(closed.reason, reason, `${name}: close reason`);
  }
});

t.test('the server\'s side: a raw client gets each mistake named in the close frame', async (t) => {
  const server = await startProtoServer({ tokens: { [project]: [token] }, handshakeTimeoutSecs: 1 });
  t.teardown(() => server.close());
  const raw = new Packr({ useRecords: false });
  const cases: [string, (ws: WebSocket) => void, number, RegExp][] = [
    ['garbage', (ws) => ws.send(Buffer.from([0x92, 0x01])), 4002, /^malformed_message: frame: not a MessagePack value/],
    ['a wrong version', (ws) => ws.send(raw.pack({ v: 9, t: 'hello' })), 4001, /^unsupported_version: v: version 9 is not supported/],
    ['a text frame', (ws) => ws.send('{"t":"hello"}'), 4002, /^malformed_message: text frames/],
    ['an oversize hello', (ws) => ws.send(Buffer.alloc(2 * 1024 * 1024)), 1009, /^message_too_large/],
    ['a heartbeat before hello', (ws) => ws.send(encodeMessage({ t: 'heartbeatAck', seq: 0 })), 4004, /^unexpected_message: expected hello/],
    ['silence', () => undefined, 4008, /^handshake_timeout/],
  ];
  for (const [name, act, code, reason] of cases) {
    const ws = new WebSocket(server.url);
    const closed = new Promise<[number, string]>((resolve) => ws.on('close', (c, r) => resolve([c, r.toString()])));
    ws.on('error', () => undefined);
    await new Promise((resolve) => ws.once('open', resolve));
    act(ws);
    const [closeCode, closeReason] = await closed;
    t.equal(closeCode, code, `${name}: code`);
    t.match(closeReason, reason, `${name}: reason`);
  }
});

t.test('NAR pushes under the server\'s credit', async (t) => {
  const fixtures = buildFixturePaths();
  const server = await startProtoServer({ openModeProjects: [], initialCredit: 1, limits: { narChunkBytes: 4096 } });
  const stingy = await startProtoServer({ openModeProjects: [], initialCredit: 0, limits: { narSendChunkTimeoutSecs: 1 } });
  t.teardown(async () => {
    await server.close();
    await stingy.close();
  });
  const infoOf = (path: string) => {
    const info = nixPathInfo(path);
    return { path, narHash: toNix32Hash(info.narHash)!, narSize: info.narSize, references: info.references, deriver: info.deriver ?? null, ca: info.ca ?? null };
  };

  const connection = await connect({ url: server.url, hello, peers: null, log, load });
  const session = await server.nextWorker();
  const pusher = new NarPusher(connection, 4096, 30);
  connection.onMessage((m) => pusher.handle(m));
  const tree = infoOf(fixtures.tree);
  t.equal(await pusher.push('job', tree, ['main']), 'stored');
  const received = session.nars.get(fixtures.tree)!;
  t.equal(received.narHash, tree.narHash, 'the NAR arrived whole, one credit at a time');
  t.ok(received.bytes.length > 40 * 4096, 'in many chunks');
  t.equal(await pusher.push('job', tree, ['main']), 'present', 'a path the server has is not sent again');
  const wrong = { ...infoOf(fixtures.file), narHash: tree.narHash };
  await t.rejects(pusher.push('job', wrong, ['main']), { code: 'verify_failed', message: /the store says/ });
  t.match(await session.next('narAbort'), { code: 'verify_failed' });

  const starved = await connect({ url: stingy.url, hello, peers: null, log, load });
  const stingySession = await stingy.nextWorker();
  const starvedPusher = new NarPusher(starved, 4096, starved.welcome.limits.narSendChunkTimeoutSecs);
  starved.onMessage((m) => starvedPusher.handle(m));
  await t.rejects(starvedPusher.push('job', infoOf(fixtures.file), ['main']), { name: 'NarPushFailed', code: 'timeout' });
  t.match(await stingySession.next('narAbort'), { code: 'timeout', reason: /no credit from the server within 1 s/ });

  const pending = starvedPusher.push('job', infoOf(fixtures.empty), ['main']);
  starved.close('shutting_down', 'bye');
  await starved.closed;
  starvedPusher.failAll('the /proto connection closed');
  await t.rejects(pending, { code: 'closed' });
  connection.close('shutting_down', 'bye');
});

t.test('worker.useTls: tokens go only over TLS or to this host', async (t) => {
  const some = peers(`*:${token}`);
  t.equal(insecureTransportProblem('ws://127.0.0.1:3000/proto', some, true), undefined);
  t.equal(insecureTransportProblem('ws://localhost:3000/proto', some, true), undefined);
  t.equal(insecureTransportProblem('wss://kiln.example/proto', some, true), undefined);
  t.equal(insecureTransportProblem('ws://kiln.example/proto', null, true), undefined, 'open mode sends no token');
  t.match(insecureTransportProblem('ws://kiln.example/proto', some, true), /neither wss:\/\/ nor this host.*worker.useTls false/);
  t.equal(insecureTransportProblem('ws://kiln.example/proto', some, false), undefined, 'useTls off: the operator vouches for the network');
  t.equal(insecureListenerProblem('127.0.0.1', true), undefined, 'a discoverable worker on loopback (behind its TLS proxy)');
  t.equal(insecureListenerProblem('::1', true), undefined);
  t.match(insecureListenerProblem('0.0.0.0', true), /plain ws:\/\/ from the network/);
  t.match(insecureListenerProblem('10.0.0.7', true), /worker.useTls false/);
  t.equal(insecureListenerProblem('0.0.0.0', false), undefined, 'useTls off: plain ws:// on the network');
});
