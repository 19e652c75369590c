// The event system under load, with its floors measured in the same run:
//  1. deliveries: N durable events to one instance webhook, delivered to a local receiver in its own
//     process, against the floor of the same receiver hit by plain keep-alive POSTs at the same
//     concurrency (no database, no queue);
//  2. firehose fan-out: M events to S WebSocket subscribers in another process, against a bare uWS
//     app publishing the same frames to the same number of sockets on one topic.
// Each part runs 3 rounds of kiln and its floor, alternating which goes first; ratios are the
// median of the rounds' ratios.
// Usage: npx tsx bench/events.bench.ts [deliveries=20000] [events=1000] [subscribers=1000]
import { fork, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import uWS from 'uWebSockets.js';
import WebSocket from 'ws';

const self = fileURLToPath(import.meta.url);
const role = process.env['KILN_BENCH_ROLE'];

if (role === 'receiver') {
  // Counts POSTs and answers 204; the parent asks for the count over IPC.
  let received = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      received += 1;
      res.writeHead(204).end();
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as { port: number }).port }));
  process.on('message', () => process.send!({ received }));
} else if (role === 'subscribers') {
  // Opens S sockets to a URL and reports when every socket has received `expect` event frames.
  const url = process.env['KILN_BENCH_URL']!;
  const count = Number(process.env['KILN_BENCH_SOCKETS']);
  const token = process.env['KILN_BENCH_TOKEN'];
  let lagged = 0;
  let skipped = 0;
  const counts = new Array<number>(count).fill(0);
  let expect = Infinity;
  let done = 0;
  const sockets: WebSocket[] = [];
  const opened: Promise<void>[] = [];
  for (let i = 0; i < count; i++) {
    const ws = new WebSocket(url, token ? { headers: { authorization: `Bearer ${token}` } } : {});
    sockets.push(ws);
    opened.push(new Promise((resolve, reject) => {
      ws.once('error', reject);
      // kiln's firehose sockets ask for stream.open (it is in their globs); the bare uWS baseline is ready at `open`.
      if (!token) ws.once('open', () => resolve());
      ws.on('message', (data: Buffer) => {
        const text = data.toString();
        if (text.startsWith('{"event":"stream.open"')) return resolve();
        if (text.startsWith('{"event":"stream.lagged"')) {
          lagged += 1;
          skipped += (JSON.parse(text) as { content: { skipped: number } }).content.skipped;
          counts[i]! += (JSON.parse(text) as { content: { skipped: number } }).content.skipped;
        } else counts[i]! += 1;
        if (counts[i] === expect) {
          done += 1;
          if (done === count) process.send!({ done: true, lagged, skipped });
        }
      });
    }));
  }
  await Promise.all(opened);
  process.send!({ ready: true });
  process.on('message', (m: { expect: number }) => {
    expect = m.expect;
    process.send!({ armed: true });
  });
} else {
  await main();
}

function child(env: Record<string, string>): ChildProcess {
  return fork(self, [], { env: { ...process.env, ...env }, execArgv: ['--import', 'tsx'] });
}

function nextMessage<T>(c: ChildProcess, accept: (m: T) => boolean = () => true): Promise<T> {
  return new Promise((resolve) => {
    const on = (m: T) => {
      if (!accept(m)) return;
      c.off('message', on);
      resolve(m);
    };
    c.on('message', on);
  });
}

function median(xs: number[]): number {
  return [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? NaN;
}

async function main(): Promise<void> {
  const deliveries = Number(process.argv[2] ?? 20_000);
  const events = Number(process.argv[3] ?? 1000);
  const subscribers = Number(process.argv[4] ?? 1000);
  const { loadConfig } = await import('../config/index.js');
  const { startKiln } = await import('../cli/kiln.js');
  const admin = postgres('postgres://postgres@127.0.0.1:5432/postgres', { max: 1, onnotice: () => undefined });
  const dbName = `kiln_bench_events_${process.pid}`;
  await admin.unsafe(`create database ${dbName}`);
  const dbUrl = `postgres://postgres@127.0.0.1:5432/${dbName}`;
  const kiln = await startKiln(loadConfig({
    scope: 'server', env: {},
    // The receiver is on loopback, which outbound destinations refuse unless allowed.
    overrides: { 'database.url': dbUrl, port: 0, useTls: false, 'log.level.default': 'error', baseDir: '/tmp/kiln-bench-events', 'outbound.allowedNetworks': ['127.0.0.1/32'] },
  }));
  const sql = postgres(dbUrl, { max: 2, onnotice: () => undefined });
  const api = async <T>(method: string, path: string, token: string | null, body?: unknown): Promise<T> => {
    const res = await fetch(`${kiln.url}/api/v1${path}`, { method, headers: token ? { authorization: `Bearer ${token}` } : {}, ...(body ? { body: JSON.stringify(body) } : {}) });
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
    return ((await res.json()) as { message: T }).message;
  };
  await api('POST', '/auth/basic/register', null, { username: 'bench', name: 'Bench', email: 'bench@example.test', password: 'bench bench bench' });
  const token = await api<string>('POST', '/auth/basic/login', null, { loginname: 'bench', password: 'bench bench bench' });
  const [user] = await sql<{ id: string }[]>`select id from users`;

  // 1. Deliveries.
  const receiver = child({ KILN_BENCH_ROLE: 'receiver' });
  const { port } = await nextMessage<{ port: number }>(receiver);
  const receiverUrl = `http://127.0.0.1:${port}/hook`;
  const receivedSoFar = async () => {
    receiver.send('count');
    return (await nextMessage<{ received: number }>(receiver, (m) => 'received' in m)).received;
  };
  // The floor: the same number of POSTs of the same size with 200 in flight over keep-alive.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 200 });
  const body = JSON.stringify({ event: 'user.create', at: new Date().toISOString(), content: { user: 'someone', user_id: user!.id } });
  const post = () => new Promise<void>((resolve, reject) => {
    const req = http.request(receiverUrl, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      res.resume();
      res.on('end', resolve);
    });
    req.on('error', reject);
    req.end(body);
  });
  /** ms for `deliveries` plain POSTs, 200 in flight */
  const floorRound = async () => {
    let sent = 0;
    const floorStart = performance.now();
    await Promise.all(Array.from({ length: 200 }, async () => {
      while (sent < deliveries) {
        sent += 1;
        await post();
      }
    }));
    return performance.now() - floorStart;
  };

  await api('PUT', '/admin/webhooks', token, { url: receiverUrl });
  let deliveredBefore = 0;
  /** ms from the first commit until all `deliveries` are recorded delivered, and ms to emit them */
  const kilnRound = async () => {
    const started = performance.now();
    let emitted = 0;
    const emitting = (async () => {
      while (emitted < deliveries) {
        const n = Math.min(200, deliveries - emitted);
        await kiln.events.events.transaction(async (_tx, emit) => {
          for (let i = 0; i < n; i++) emit('user.create', { user: `u${emitted + i}`, user_id: user!.id });
        });
        emitted += n;
      }
      return performance.now() - started;
    })();
    const deadline = started + 20 * 60_000;
    for (;;) {
      const [row] = await sql<{ n: number }[]>`select count(*)::int as n from event_deliveries where status = 'delivered'`;
      if (row!.n >= deliveredBefore + deliveries) break;
      if (performance.now() > deadline) throw new Error(`only ${row!.n - deliveredBefore} of ${deliveries} delivered after 20 minutes`);
      await new Promise((r) => setTimeout(r, 100));
    }
    deliveredBefore += deliveries;
    return { deliveredMs: performance.now() - started, emitMs: await emitting };
  };
  const before = await receivedSoFar();
  const floorMs: number[] = [];
  const kilnRuns: { deliveredMs: number; emitMs: number }[] = [];
  for (let round = 0; round < 3; round++) {
    // Which goes first alternates.
    if (round % 2 === 0) {
      floorMs.push(await floorRound());
      kilnRuns.push(await kilnRound());
    } else {
      kilnRuns.push(await kilnRound());
      floorMs.push(await floorRound());
    }
  }
  agent.destroy();
  const received = (await receivedSoFar()) - before;
  const deliveredMs = median(kilnRuns.map((r) => r.deliveredMs));
  console.log(JSON.stringify({
    bench: 'event-deliveries', deliveries, rounds: 3, received,
    emitPerSec: Math.round(deliveries / (median(kilnRuns.map((r) => r.emitMs)) / 1000)),
    deliveredPerSec: Math.round(deliveries / (deliveredMs / 1000)),
    floorPostsPerSec: Math.round(deliveries / (median(floorMs) / 1000)),
    // the floor's time ÷ kiln's of each round (rates: kiln ÷ floor), their median
    ratioToFloor: +median(kilnRuns.map((r, i) => floorMs[i]! / r.deliveredMs)).toFixed(3),
  }));
  receiver.kill();

  // 2. Firehose fan-out, interleaved with the bare uWS baseline.
  const frame = JSON.stringify({ event: 'worker.queue_depth', at: new Date().toISOString(), content: { queued: 1, by_system: { 'x86_64-linux': 1 } } });
  const bare = uWS.App().ws('/fan', { open: (ws) => void ws.subscribe('all'), maxBackpressure: 64 * 1024 * 1024 });
  const barePort = await new Promise<number>((r) => bare.listen('127.0.0.1', 0, (s) => r(uWS.us_socket_local_port(s as unknown as uWS.us_socket))));
  const rounds: Record<string, number[]> = { 'bare uWS topic': [], 'kiln firehose': [] };
  let lagged = 0;
  for (let round = 0; round < 3; round++) {
    // Which goes first alternates.
    const targets = Object.keys(rounds);
    for (const target of round % 2 === 0 ? targets : targets.reverse()) {
      const isKiln = target === 'kiln firehose';
      const subs = child({
        KILN_BENCH_ROLE: 'subscribers', KILN_BENCH_SOCKETS: String(subscribers),
        KILN_BENCH_URL: isKiln ? `${kiln.url.replace('http', 'ws')}/api/v1/metrics/events?events=worker.*,stream.open` : `ws://127.0.0.1:${barePort}/fan`,
        ...(isKiln ? { KILN_BENCH_TOKEN: token } : {}),
      });
      await nextMessage(subs, (m: { ready?: boolean }) => m.ready === true);
      subs.send({ expect: events });
      await nextMessage(subs, (m: { armed?: boolean }) => m.armed === true);
      const finished = nextMessage<{ done: boolean; lagged: number; skipped: number }>(subs, (m) => m.done === true);
      const t0 = performance.now();
      for (let i = 0; i < events; i++) {
        if (isKiln) kiln.events.bus.publish({ event: 'worker.queue_depth', scope: {}, frame });
        else bare.publish('all', frame);
        if (i % 50 === 49) await new Promise((r) => setImmediate(r));
      }
      const result = await finished;
      rounds[target]!.push(performance.now() - t0);
      if (isKiln) lagged += result.lagged;
      subs.kill();
      await new Promise((r) => subs.once('exit', r));
    }
  }
  for (const [target, ms] of Object.entries(rounds)) {
    const m = median(ms);
    // the bare time ÷ this target's of each round (rates: this ÷ bare), their median
    const ratioToBareUws = +median(ms.map((x, i) => rounds['bare uWS topic']![i]! / x)).toFixed(3);
    console.log(JSON.stringify({ bench: 'firehose-fanout', target, subscribers, events, ms: Math.round(m), framesPerSec: Math.round((events * subscribers) / (m / 1000)), ratioToBareUws }));
  }
  console.log(JSON.stringify({ bench: 'firehose-fanout', laggedNotices: lagged }));
  bare.close();
  await sql.end();
  await kiln.stop();
  await admin.unsafe(`drop database ${dbName} with (force)`);
  await admin.end();
}
