// A serving thread's own line for storage read places (docs/binary-cache.md, "Storage reads";
// storage/nars/threadReadLine.ts), with real sockets through `http.threads` 2: readers beyond
// nar.maxConcurrentDownloads wait in the thread they reached and get their bytes from it (no relay
// to the main thread), a waiter not served in time is refused 503 storage_busy by the thread, one
// whose client hangs up leaves the line, and a held read below the minimum pace loses its place and
// its connection. A held read is a client taking a chunk now and then (uWS cuts one that takes
// nothing for 10 s). The main thread also listens on the port, so a request may land there: the
// assertions are about the requests the threads took (their summaries), and a read the test must
// hold in a thread is tried again until a thread holds it.
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { get } from 'node:http';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { crawl, holdOpen, readAll, type Crawl } from '../../support/heldReads.js';
import { signUp } from '../../support/accounts.js';
import { eventually } from '../../support/eventually.js';
import { startTestKiln, type TestKiln } from '../../support/kiln.js';
import { localNar, uploadIntoFreshCache, type LocalNar } from '../../support/narUploads.js';
import { nixStoreAdd, tempDir } from '../../support/nixStore.js';
import { SharedReadPlaces, type ReadPaceLimits } from '../../../storage/index.js';
import type { OptionPath } from '../../../config/index.js';
import { threadSum } from '../../support/servingThreads.js';

type Sums = Record<'requests' | 'forwarded' | 'nars' | 'readsHeld' | 'readsWaiting' | 'storageBusy' | 'tooSlow', number>;

interface Answer { status: number; code?: string; retryAfter?: string; bytes: number }

/** One GET read to the end on a connection of its own (so that requests spread over the listeners). */
function fresh(url: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    get(url, { agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const body = Buffer.concat(chunks);
        if (res.statusCode !== 503) return resolve({ status: res.statusCode ?? 0, bytes: body.length });
        resolve({ status: 503, code: (JSON.parse(body.toString()) as { code: string }).code, retryAfter: String(res.headers['retry-after']), bytes: body.length });
      });
    }).on('error', reject);
  });
}

// Three servers, each uploading a 24 MiB NAR and holding reads: past tap's 300 s per file under CI's load.
t.setTimeout(600_000);

// Nix blocks this event loop (the main thread's): the NAR is made before any server starts.
const dir = join(tempDir('kiln-thread-line-'), 'big');
mkdirSync(dir);
writeFileSync(join(dir, 'noise'), randomBytes(24 << 20)); // more than the sockets' buffers take from a reader that stops
const nar: LocalNar = localNar(nixStoreAdd(dir));

interface Served {
  kiln: TestKiln;
  narUrl: string;
  fileSize: number;
  /** the count shared by the main thread and the threads, read as a thread reads it */
  places: SharedReadPlaces;
  sums(): Promise<Sums>;
}

/**
 * Reads the test holds open stay held for as long as the machine takes (minutes under load): they
 * must not be cut for their pace except where that is the point.
 */
const NO_PACE: ReadPaceLimits = { minBytesPerSec: 1, checkMs: 3_600_000 };

async function serve(t: Test, overrides: Partial<Record<OptionPath, unknown>>, pace: ReadPaceLimits = NO_PACE): Promise<Served> {
  const kiln = await startTestKiln(t, { 'http.threads': 2, 'nar.smallBytes': 0, 'nar.hotCacheBytes': 0, ...overrides }, { narReadPace: pace });
  const ada = await signUp(kiln, 'ada');
  const { cache, answer: uploaded } = await uploadIntoFreshCache(kiln, ada, 'line', nar, 4 << 20);
  t.equal(uploaded.status, 200);
  const { file_hash, file_size } = uploaded.body.message as { file_hash: string; file_size: number };
  const places = new SharedReadPlaces(kiln.nars.readPlaces.limit, kiln.nars.readPlaces.buffer);
  // Read in this process (what GET /api/v1/admin/actors shows): an API request would land on a thread and be counted.
  const sums = async (): Promise<Sums> => {
    const root = kiln.root.inspect();
    const out: Sums = { requests: 0, forwarded: 0, nars: 0, readsHeld: 0, readsWaiting: 0, storageBusy: 0, tooSlow: 0 };
    for (const key of Object.keys(out) as (keyof Sums)[]) out[key] = threadSum(root, key);
    return Promise.resolve(out);
  };
  return { kiln, narUrl: `${kiln.url}/cache/${cache}/nar/${file_hash}.nar.zst`, fileSize: file_size, places, sums };
}

/** A crawling read held by a serving thread: reads that landed on the main thread are read out and tried again. */
async function holdInThread(t: Test, s: Served): Promise<Crawl> {
  for (let attempt = 0; attempt < 40; attempt++) {
    const before = (await s.sums()).readsHeld;
    const placesHeld = s.places.active; // reads this test already holds keep theirs
    const res = await holdOpen(s.narUrl);
    t.equal(res.statusCode, 200);
    if ((await s.sums()).readsHeld > before) return crawl(res);
    t.equal(await readAll(res), s.fileSize);
    await eventually(() => s.places.active === placesHeld, { message: 'the main thread\'s read gave its place back' });
  }
  throw new Error('no thread took a read in 40 tries');
}

t.test('readers beyond the places wait in the thread they reached and get their bytes from it', async (t) => {
  const s = await serve(t, { 'nar.maxConcurrentDownloads': 2, 'nar.storageOpenTimeoutSecs': 120 });
  const held = [await holdInThread(t, s), await holdInThread(t, s)];
  const before = await s.sums();
  const readers = Array.from({ length: 10 }, () => fresh(s.narUrl));
  await eventually(async () => (await s.sums()).readsWaiting, { message: 'readers wait in a thread\'s line' });
  for (const h of held) t.equal(await h.finish(), s.fileSize, 'the held read delivers every byte');
  const answers = await Promise.all(readers);
  t.same(new Set(answers.map((a) => `${a.status} ${a.bytes}`)), new Set([`200 ${s.fileSize}`]), 'every reader got the whole file');
  const after = await s.sums();
  t.ok(after.requests > before.requests, `the threads took ${after.requests - before.requests} of the 10`);
  t.equal(after.forwarded - before.forwarded, 0, 'no thread relayed a reader to the main thread');
  t.equal(after.nars - before.nars, after.requests - before.requests, 'each reader a thread took got its bytes from that thread');
  await eventually(async () => s.places.active === 0 && (await s.sums()).readsHeld === 0, { message: 'every place given back' });
});

t.test('a waiter not served in time is refused by the thread; a waiter that hangs up leaves the line', async (t) => {
  const s = await serve(t, { 'nar.maxConcurrentDownloads': 1, 'nar.storageOpenTimeoutSecs': 5 });
  const held = await holdInThread(t, s);

  const before = await s.sums();
  const refused = await Promise.all(Array.from({ length: 6 }, () => fresh(s.narUrl)));
  t.same(new Set(refused.map((a) => `${a.status} ${a.code} ${a.retryAfter}`)), new Set(['503 storage_busy 1']), 'every listener refuses in time, Retry-After: 1');
  const after = await s.sums();
  t.equal(after.forwarded - before.forwarded, 0, 'the threads answered their refusals themselves');
  t.equal(after.storageBusy - before.storageBusy, after.requests - before.requests, 'each reader a thread took was refused by it');

  // A waiter in a thread's line hangs up: it leaves at once and takes nothing when the place frees.
  let waiter: Socket | null = null;
  for (let attempt = 0; attempt < 40 && waiter === null; attempt++) {
    const socket = connect({ host: '127.0.0.1', port: s.kiln.port });
    socket.on('error', () => undefined);
    socket.write(`GET ${new URL(s.narUrl).pathname} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
    const where = await eventually(async () => ((await s.sums()).readsWaiting > 0 ? 'thread' : s.places.waiting > 0 ? 'main' : ''), { message: 'the reader waits in a line' });
    if (where === 'thread') waiter = socket;
    else socket.destroy();
    await eventually(() => s.places.waiting === 0, { message: 'the main thread\'s line is empty' });
  }
  if (waiter === null) return t.fail('no waiter reached a thread in 40 tries');
  const busyBefore = (await s.sums()).storageBusy;
  waiter.destroy();
  await eventually(async () => (await s.sums()).readsWaiting === 0, { message: 'the waiter that hung up left the thread\'s line' });
  t.equal((await s.sums()).storageBusy, busyBefore, 'it left because it hung up, not because its time ran out');
  t.equal(await held.finish(), s.fileSize, 'the held read delivers every byte');
  await eventually(async () => s.places.active === 0 && (await s.sums()).readsHeld === 0, { message: 'the place is free, taken by nobody' });
  t.same(await fresh(s.narUrl), { status: 200, bytes: s.fileSize }, 'the next reader gets it');
});

t.test('a held read below the minimum pace loses its place and its connection', async (t) => {
  // Strict, so that a reader that stops is cut within seconds; a loopback reader is far faster.
  const s = await serve(t, { 'nar.maxConcurrentDownloads': 1, 'nar.storageOpenTimeoutSecs': 120 }, { minBytesPerSec: 1 << 20, checkMs: 500 });
  const before = await s.sums();
  const trickler = await holdInThread(t, s); // a chunk every CRAWL_MS: far below 1 MiB/s, never idle
  const received = await trickler.closed;
  t.ok(received < s.fileSize, `the connection was closed before the whole file (${received} of ${s.fileSize} bytes)`);
  const after = await s.sums();
  t.equal(after.tooSlow - before.tooSlow, 1, 'the thread cut it for its pace');
  await eventually(() => s.places.active === 0, { message: 'its place is free' });
  t.same(await fresh(s.narUrl), { status: 200, bytes: s.fileSize }, 'the next reader gets the place and the whole file');
});
