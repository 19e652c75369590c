// http.threads > 1 (docs/http.md, "Serving threads"): serving threads share the server's port,
// answer narinfos from their own memory, relay the rest (API, WebSockets) to the main thread, forget
// what an upload or an access change made stale, show in /admin/actors with their counts, and a
// thread killed under load is restarted while the others keep answering.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { join } from 'node:path';
import t from 'tap';
import WebSocket from 'ws';
import { startTestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { eventually } from '../../support/eventually.js';
import { buildFixturePaths, nixStoreAdd, tempDir } from '../../support/nixStore.js';
import { localNar, uploadChunked } from '../../support/narUploads.js';
import { threadNodes, threadSum, type ActorNode } from '../../support/servingThreads.js';

const THREADS = 3;

interface FreshAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  bytes: Buffer;
}

/** One request on a connection of its own, so that requests spread over the listeners. */
function requestFresh(url: string, headers: Record<string, string> = {}, method = 'GET'): Promise<FreshAnswer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method, agent: false, headers: { connection: 'close', ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, bytes: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/** One GET on a connection of its own, its body as text. */
const getFresh = async (url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> => {
  const answer = await requestFresh(url, headers);
  return { status: answer.status, body: answer.bytes.toString() };
};

/** `n` requests at once, each on its own connection. */
const many = (n: number, url: string, headers: Record<string, string> = {}, method = 'GET'): Promise<FreshAnswer[]> =>
  Promise.all(Array.from({ length: n }, () => requestFresh(url, headers, method)));


t.test('serving threads', async (t) => {
  // Every Nix call blocks this event loop, which runs the main thread's server too, while the
  // serving threads keep time: a keep-alive connection idle that long (uWS: 10 s) is closed under the
  // client's next request. So every NAR is prepared before the server starts.
  const fixtures = buildFixturePaths();
  const [tree, file, secret] = [localNar(fixtures.tree), localNar(fixtures.file), localNar(fixtures.executable)];
  // 5 MiB that zstd cannot shrink: several 1 MiB pieces, streamed with backpressure.
  const noise = tempDir('kiln-threads-nar-');
  writeFileSync(join(noise, 'noise'), randomBytes(5 << 20));
  const big = localNar(nixStoreAdd(noise));
  const kiln = await startTestKiln(t, { 'http.threads': THREADS });
  t.ok(kiln.servingThreads, 'threads started');
  const admin = await signUp(kiln, 'ada');
  await createTestCache(kiln.sql, 'pub', { public: true, ownerId: admin.id });
  t.equal((await uploadChunked(kiln, admin.token, 'pub', tree)).status, 200);
  const narinfo = `${kiln.url}/cache/pub/${tree.hash}.narinfo`;
  const actorTree = async () => (await kiln.api<ActorNode>('GET', '/admin/actors', { token: admin.token })).message;
  const missing = `${kiln.url}/cache/pub/${file.hash}.narinfo`;

  t.test('narinfos and misses answer alike on every listener; threads answer from memory', async (t) => {
    // Two rounds: the first teaches each thread the answer, the second finds it in memory.
    await Promise.all(Array.from({ length: 30 }, () => getFresh(narinfo)));
    const answers = await Promise.all(Array.from({ length: 60 }, () => getFresh(narinfo)));
    t.same(new Set(answers.map((a) => a.status)), new Set([200]));
    t.equal(new Set(answers.map((a) => a.body)).size, 1, 'one body');
    t.same(new Set((await Promise.all(Array.from({ length: 20 }, () => getFresh(missing)))).map((a) => a.status)), new Set([404]));
    const root = (await kiln.api<ActorNode>('GET', '/admin/actors', { token: admin.token })).message;
    t.equal(threadNodes(root).length, THREADS, 'each thread is a supervised child');
    const sum = (field: string) => threadSum(root, field);
    t.ok(sum('requests') > 0 && sum('fromMemory') > 0, `threads counted requests (${sum('requests')}) and memory answers (${sum('fromMemory')})`);
    // at least the shrink each thread runs once it listens; benches divide these by the requests
    t.ok(sum('gcTotal') >= THREADS && sum('gcTotalMs') > 0, `threads counted their collections since they started (${sum('gcTotal')}, ${sum('gcTotalMs')} ms)`);
  });

  t.test('the threads take every connection: the main thread listens on loopback only', async (t) => {
    // Each admin/actors read is itself a request a thread relays, counted before the main thread
    // reads the counters: one more between the two reads.
    const before = threadSum(await actorTree(), 'requests');
    const n = 60;
    t.same(new Set((await many(n, narinfo)).map((a) => a.status)), new Set([200]));
    const after = threadSum(await actorTree(), 'requests');
    t.equal(after - before, n + 1, 'every request reached a serving thread (none the main thread directly)');
  });

  t.test('the API and WebSockets through any listener', async (t) => {
    const statuses = await Promise.all(Array.from({ length: 20 }, () => getFresh(`${kiln.url}/api/v1/user`, { authorization: `Bearer ${admin.token}` })));
    t.same(new Set(statuses.map((s) => s.status)), new Set([200]));
    const refused = await Promise.all(Array.from({ length: 8 }, () => new Promise<number>((resolve) => {
      const ws = new WebSocket(`${kiln.url.replace('http', 'ws')}/api/v1/metrics/events`);
      ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      ws.on('open', () => {
        ws.close();
        resolve(101);
      });
      ws.on('error', () => resolve(-1));
    })));
    t.same(new Set(refused), new Set([401]), 'a live socket without a token is refused as the main thread refuses it');
    // An open socket: the main thread's frames reach the client through whichever listener took it.
    const frames = await Promise.all(Array.from({ length: 20 }, () => new Promise<string>((resolve) => {
      const ws = new WebSocket(`${kiln.url.replace('http', 'ws')}/api/v1/metrics/events?events=stream.open`, { headers: { authorization: `Bearer ${admin.token}` } });
      // A bound so that a socket the relay never serves fails the test instead of hanging it.
      const silent = setTimeout(() => {
        resolve('silent for 30 s');
        ws.terminate();
      }, 30_000);
      ws.on('message', (data: Buffer) => {
        clearTimeout(silent);
        resolve((JSON.parse(data.toString()) as { event: string }).event);
        ws.close();
      });
      ws.on('unexpected-response', (_req, res) => {
        clearTimeout(silent);
        resolve(`answered ${res.statusCode} instead of switching protocols`);
      });
      ws.on('error', (e) => resolve(`error ${e.message}`));
      ws.on('close', (code) => {
        clearTimeout(silent);
        resolve(`closed ${code}`);
      });
    })));
    // Every relayed socket: none may end before its first frame (the relay race, http/serving/lateUpgrades.ts).
    t.same(new Set(frames), new Set(['stream.open']), 'every open socket hears the main thread');
  });

  t.test('clients that leave while the main thread is sending: no thread fails', async (t) => {
    // Frames already on their way to a thread when its client left must be dropped there: sending
    // them on the closed uWS socket threw and ended the thread, with all its connections
    // (seen with 1,000 relayed workers, bench/protoWorkers.bench.ts).
    const startsBefore = Array.from({ length: THREADS }, (_, i) => kiln.servingThreads!.starts(i));
    let flowing = true;
    let n = 0;
    const padding = 'x'.repeat(2048);
    const flow = (async () => {
      while (flowing) {
        for (let i = 0; i < 50; i++) kiln.events.bus.publish({ event: 'worker.queue_depth', scope: {}, frame: JSON.stringify({ event: 'worker.queue_depth', at: new Date().toISOString(), content: { queued: n++, padding } }) });
        await new Promise((r) => setImmediate(r));
      }
    })();
    for (let round = 0; round < 5; round++) {
      await Promise.all(Array.from({ length: 20 }, () => new Promise<void>((resolve) => {
        const ws = new WebSocket(`${kiln.url.replace('http', 'ws')}/api/v1/metrics/events?events=worker.*`, { headers: { authorization: `Bearer ${admin.token}` } });
        ws.once('message', () => {
          ws.terminate();
          resolve();
        });
        ws.on('error', () => resolve());
        ws.on('close', () => resolve());
      })));
    }
    flowing = false;
    await flow;
    const startsAfter = Array.from({ length: THREADS }, (_, i) => kiln.servingThreads!.starts(i));
    t.same(startsAfter, startsBefore, 'no thread was restarted');
    const statuses = await Promise.all(Array.from({ length: 20 }, () => getFresh(narinfo)));
    t.same(new Set(statuses.map((a) => a.status)), new Set([200]));
  });

  t.test('an upload and an access change reach every thread', async (t) => {
    t.equal((await uploadChunked(kiln, admin.token, 'pub', file)).status, 200);
    const after = await Promise.all(Array.from({ length: 30 }, () => getFresh(missing)));
    t.same(new Set(after.map((a) => a.status)), new Set([200]), 'no thread serves its remembered miss after the upload');
    // Cache names are case-insensitive: every thread learns the narinfo under other spellings too.
    const spellings = ['PUB', 'Pub'].map((name) => `${kiln.url}/cache/${name}/${tree.hash}.narinfo`);
    for (const url of spellings) await Promise.all(Array.from({ length: 30 }, () => getFresh(url)));
    const learned = await Promise.all(spellings.flatMap((url) => Array.from({ length: 30 }, () => getFresh(url))));
    t.same(new Set(learned.map((a) => a.status)), new Set([200]), 'other spellings of the name answer');
    t.equal((await kiln.api('PATCH', '/caches/pub', { token: admin.token, body: { public: false } })).status, 200);
    const privately = await Promise.all([narinfo, ...spellings].flatMap((url) => Array.from({ length: 30 }, () => getFresh(url))));
    t.same(new Set(privately.map((a) => a.status)), new Set([401]), 'no thread serves a cache made private from memory, in any spelling');
    t.equal((await kiln.api('PATCH', '/caches/pub', { token: admin.token, body: { public: true } })).status, 200);
  });

  t.test('NAR files: the threads send them themselves, answering as the main thread does', async (t) => {
    t.equal((await uploadChunked(kiln, admin.token, 'pub', big)).status, 200);
    const url = /^URL: (.*)$/m.exec((await getFresh(`${kiln.url}/cache/pub/${big.hash}.narinfo`)).body)?.[1];
    const nar = `${kiln.url}/cache/pub/${url}`;
    // With credentials a request always goes to the main thread's route: the reference answer.
    const basic = { authorization: `Basic ${Buffer.from(`ada:${admin.token}`).toString('base64')}` };
    const reference = await requestFresh(nar, basic);
    t.equal(reference.status, 200);
    t.ok(reference.bytes.length > 5 << 20, `the reference is the whole file (${reference.bytes.length} bytes)`);
    const sentBefore = threadSum(await actorTree(), 'nars');

    const whole = await many(24, nar);
    t.same(new Set(whole.map((a) => a.status)), new Set([200]));
    t.ok(whole.every((a) => a.bytes.equals(reference.bytes)), 'every listener sends the same bytes');
    t.same(new Set(whole.map((a) => `${a.headers['content-type']}|${a.headers['cache-control']}|${a.headers['accept-ranges']}`)),
      new Set([`${reference.headers['content-type']}|${reference.headers['cache-control']}|${reference.headers['accept-ranges']}`]), 'with the same headers');
    t.ok(threadSum(await actorTree(), 'nars') > sentBefore, 'threads sent files themselves');

    const range = { range: 'bytes=1000-2500000' };
    const partReference = await requestFresh(nar, { ...basic, ...range });
    t.equal(partReference.status, 206);
    const parts = await many(16, nar, range);
    t.same(new Set(parts.map((a) => `${a.status} ${a.headers['content-range']}`)), new Set([`206 ${partReference.headers['content-range']}`]));
    t.ok(parts.every((a) => a.bytes.equals(reference.bytes.subarray(1000, 2500001))), 'a range is the same bytes everywhere');
    const heads = await many(16, nar, {}, 'HEAD');
    t.same(new Set(heads.map((a) => `${a.status} ${a.headers['content-length']} ${a.bytes.length}`)), new Set([`200 ${reference.bytes.length} 0`]), 'HEAD: the length, no body');
    const outside = await many(16, nar, { range: `bytes=${reference.bytes.length}-` });
    t.same(new Set(outside.map((a) => `${a.status} ${a.headers['content-range']}`)), new Set([`416 bytes */${reference.bytes.length}`]));

    // Another tenant's file under this cache's name, and that tenant's private cache without credentials.
    await createTestCache(kiln.sql, 'hidden', { public: false, ownerId: admin.id });
    t.equal((await uploadChunked(kiln, admin.token, 'hidden', secret)).status, 200);
    const secretUrl = /^URL: (.*)$/m.exec((await getFresh(`${kiln.url}/cache/hidden/${secret.hash}.narinfo`, basic)).body)?.[1];
    t.equal((await requestFresh(`${kiln.url}/cache/hidden/${secretUrl}`, basic)).status, 200, 'the owner reads it');
    t.same(new Set((await many(16, `${kiln.url}/cache/pub/${secretUrl}`)).map((a) => a.status)), new Set([404]), 'not under another cache');
    t.same(new Set((await many(16, `${kiln.url}/cache/hidden/${secretUrl}`)).map((a) => a.status)), new Set([401]), 'not without credentials');
    t.same(new Set((await many(16, `${kiln.url}/cache/HIDDEN/${secretUrl}`)).map((a) => a.status)), new Set([401]), 'in no spelling');

    // Every thread holds a grant now; a delete and an access change drop them at once.
    await many(24, `${kiln.url}/cache/PUB/${url}`);
    t.equal((await kiln.api('PATCH', '/caches/pub', { token: admin.token, body: { public: false } })).status, 200);
    const privately = await Promise.all([nar, `${kiln.url}/cache/PUB/${url}`].map((u) => many(16, u)));
    t.same(new Set(privately.flat().map((a) => a.status)), new Set([401]), 'a cache made private: no thread sends its files');
    t.equal((await kiln.api('PATCH', '/caches/pub', { token: admin.token, body: { public: true } })).status, 200);
    t.same(new Set((await many(24, nar)).map((a) => a.status)), new Set([200]));
    t.equal((await kiln.api('DELETE', `/caches/pub/nars/${big.hash}`, { token: admin.token })).status, 200);
    t.same(new Set((await many(24, nar)).map((a) => a.status)), new Set([404]), 'a deleted path: no thread sends its file');
  });

  t.test('a thread killed under load: the others answer, it restarts', async (t) => {
    const threads = kiln.servingThreads!;
    let running = true;
    const outcomes = { ok: 0, failed: 0, okAfterRestart: 0 };
    const load = Promise.all(Array.from({ length: 4 }, async () => {
      while (running) {
        try {
          const a = await getFresh(narinfo);
          if (a.status === 200) {
            outcomes.ok++;
            if (threads.starts(0) >= 2) outcomes.okAfterRestart++;
          } else outcomes.failed++;
        } catch {
          outcomes.failed++; // a connection of the killed thread
        }
      }
    }));
    await eventually(() => outcomes.ok > 20, { message: 'load is running' });
    threads.crash(0);
    await eventually(() => threads.starts(0) >= 2, { message: 'thread 0 restarts' });
    await eventually(() => outcomes.okAfterRestart > 50, { message: 'answers keep coming after the restart', timeout: 60_000 });
    running = false;
    await load;
    t.ok(outcomes.failed <= 4, `at most the killed thread's connections failed (${outcomes.failed})`);
    const node = threadNodes((await kiln.api<ActorNode>('GET', '/admin/actors', { token: admin.token })).message).find((n) => n.id === 'http-thread-0');
    t.equal(node?.restarts, 1, 'the supervisor counted the restart');
    const all = await Promise.all(Array.from({ length: 30 }, () => getFresh(narinfo)));
    t.same(new Set(all.map((a) => a.status)), new Set([200]));
  });
});
