// Several server processes on one database and one baseDir (docs/binary-cache.md, "More cores"):
// consecutive requests of one staged upload may reach different processes, but only one process
// at a time works on it. Each "process" here is a NarStorage with a pool, a CPU pool, a blob store
// and a real instance lease of its own, on the same database and the same baseDir.
import { createHash, randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import postgres, { type Sql } from 'postgres';
import t, { type Test } from 'tap';
import { sha256Nix32, SigningKey } from '../../../protocol/index.js';
import { acquireInstanceLease, createCpuPool, LEASE_NAMESPACE, FilesystemBlobStore, narBlobKey, openNarStorage, type BlobStore, type NarStorage } from '../../../storage/index.js';
import { createTestCache } from '../../support/caches.js';
import { testDatabase } from '../../support/db.js';
import { makeTestNar, type TestNar } from '../../support/narStorage.js';

interface Process {
  name: string;
  sql: Sql;
  nars: NarStorage;
  leaseKey: number;
}

/** A request body the test holds open: its first piece goes out at once, the rest when `finish` is called. */
function heldBody(first: Uint8Array, rest: Uint8Array) {
  let started!: () => void;
  const reading = new Promise<void>((resolve) => (started = resolve));
  let finish!: (outcome: { fail?: Error }) => void;
  const finished = new Promise<{ fail?: Error }>((resolve) => (finish = resolve));
  async function* body(): AsyncGenerator<Uint8Array> {
    yield first;
    started(); // asked for the second piece: the first is being written, the upload is claimed
    const outcome = await finished;
    if (outcome.fail) throw outcome.fail;
    yield rest;
  }
  return { body: body(), reading, finish };
}

/** A body that records whether anyone read it. */
function untouchedBody(bytes: Uint8Array) {
  const state = { read: false };
  async function* body(): AsyncGenerator<Uint8Array> {
    state.read = true;
    yield bytes;
  }
  return { body: body(), state };
}

const one = (bytes: Uint8Array): AsyncIterable<Uint8Array> => (async function* () {
  yield bytes;
})();

t.test('one staged upload, two server processes', async (t) => {
  const { url, sql } = await testDatabase(t);
  const baseDir = await mkdtemp(join(tmpdir(), 'kiln-cross-'));
  t.teardown(() => rm(baseDir, { recursive: true, force: true }));
  const config = {
    baseDir, 'nar.hotCacheBytes': 64 << 20, 'nar.smallBytes': 1 << 20, 'nar.maxUploadSize': 64 << 20,
    'nar.partialTtlSecs': 3600, 'gc.narUploadGraceHours': 24, 'gc.intervalSecs': 3600,
    'nar.maxConcurrentDownloads': 16, 'nar.maxConcurrentServes': 8, 'nar.storageOpenTimeoutSecs': 60,
  };
  const sharedBlobs: BlobStore = new FilesystemBlobStore(join(baseDir, 'blobs'));
  t.teardown(() => sharedBlobs.close());

  const open = async (t: Test, name: string): Promise<Process> => {
    const own = postgres(url, { max: 4, onnotice: () => undefined, connection: { application_name: `kiln-test-${name}` } });
    const lease = await acquireInstanceLease(own);
    const cpu = createCpuPool({ maxThreads: 1 });
    const blobs = new FilesystemBlobStore(join(baseDir, 'blobs'));
    const nars = openNarStorage({ sql: own, blobs, cpu, leaseKey: lease.key, log: pino({ level: 'silent' }), config });
    t.teardown(async () => {
      await nars.close().catch(() => undefined);
      await cpu.destroy();
      await blobs.close();
      await lease.release();
      await own.end({ timeout: 5 });
    });
    return { name, sql: own, nars, leaseKey: lease.key };
  };
  const cache = async (name: string) => ({ ...(await createTestCache(sql, name, { public: true, baseDir })), key: SigningKey.generate(`${name}-test-1`) });
  const rowOf = async (cacheId: string, uploadKey: string) =>
    (await sql<{ bytes_staged: string; writer: number | null }[]>`
      select bytes_staged, writer from staged_uploads where cache_id = ${cacheId} and upload_key = ${uploadKey}`)[0] ?? null;
  const stagedFile = (cacheId: string, uploadKey: string) =>
    join(baseDir, 'staging', 'uploads', `${cacheId}-${createHash('sha256').update(uploadKey).digest('hex').slice(0, 32)}.part`);
  const storedNar = async (fileHash: string): Promise<{ nar: Buffer; fileHash: string }> => {
    const blob = await sharedBlobs.get(narBlobKey(fileHash));
    const pieces: Uint8Array[] = [];
    for await (const piece of blob!.body) pieces.push(piece);
    const bytes = Buffer.concat(pieces);
    return {
      nar: execFileSync('zstd', ['-d', '-c'], { input: bytes, maxBuffer: 1 << 27 }),
      fileHash: sha256Nix32(createHash('sha256').update(bytes).digest()).slice('sha256:'.length),
    };
  };
  const isInProgress = (elsewhere: boolean) => ({
    kind: 'upload_in_progress',
    message: elsewhere ? /another kiln server process is writing or finalizing/ : /another request is writing or finalizing/,
  });

  t.test('a claimed upload refuses the other process, which changes nothing; then it takes over', async (t) => {
    const a = await open(t, 'a1');
    const b = await open(t, 'b1');
    const c = await cache('handover');
    // 24 MiB: A compresses and joins a whole frame (16 MiB) in the background before B takes over.
    const nar = await makeTestNar(t, { a: randomBytes(24 << 20), b: 'small\n' }, [], 'handover');
    const finalize = (p: Process, n: TestNar) => p.nars.uploads.finalize({ cacheId: c.id, uploadKey: n.hash, signingKey: c.key, info: n.info });
    const first = 1 << 20;
    const second = 21 << 20;

    // The first chunk: the row is created and claimed in one statement.
    const opening = heldBody(nar.nar.subarray(0, first >> 1), nar.nar.subarray(first >> 1, first));
    const appending = a.nars.uploads.appendChunk(c.id, nar.hash, 0, opening.body);
    await opening.reading;
    t.same(await rowOf(c.id, nar.hash), { bytes_staged: '0', writer: a.leaseKey }, 'A holds the new row');
    const refused = untouchedBody(nar.nar.subarray(0, first));
    await t.rejects(b.nars.uploads.appendChunk(c.id, nar.hash, 0, refused.body), isInProgress(true), 'B cannot start the same upload');
    await t.rejects(finalize(b, nar), isInProgress(true), 'nor finalize it');
    await t.rejects(b.nars.uploads.abandon(c.id, nar.hash), isInProgress(true), 'nor abandon it');
    t.equal(refused.state.read, false, "B did not read its body");
    opening.finish({});
    t.equal(await appending, first);
    t.same(await rowOf(c.id, nar.hash), { bytes_staged: String(first), writer: null }, 'A gave the claim up');

    // A later chunk: B at the same offset, and B's finalize, get 409 and change nothing.
    const middle = heldBody(nar.nar.subarray(first, first + (8 << 20)), nar.nar.subarray(first + (8 << 20), second));
    const appendingMore = a.nars.uploads.appendChunk(c.id, nar.hash, first, middle.body);
    await middle.reading;
    const racing = untouchedBody(randomBytes(second - first));
    await t.rejects(b.nars.uploads.appendChunk(c.id, nar.hash, first, racing.body), isInProgress(true), 'B at the same offset');
    await t.rejects(finalize(b, nar), isInProgress(true), "B's finalize");
    t.equal(racing.state.read, false, "B did not read its chunk's body");
    t.same(await rowOf(c.id, nar.hash), { bytes_staged: String(first), writer: a.leaseKey }, 'the row is as A left it');
    t.ok((await readFile(stagedFile(c.id, nar.hash))).subarray(0, first).equals(nar.nar.subarray(0, first)), 'the staged bytes are untouched');
    // The sweeper of any process leaves an upload that a live process works on, however old.
    await b.nars.sweep(new Date(Date.now() + 7200_000));
    t.not(await rowOf(c.id, nar.hash), null, 'a sweep does not expire a claimed upload');
    t.equal((await sql<{ n: string }[]>`select count(*) as n from cached_paths`)[0]!.n, '0', 'nothing was ingested');

    // A finishes; B sends the rest and finalizes.
    middle.finish({});
    t.equal(await appendingMore, second);
    t.equal(await b.nars.uploads.appendChunk(c.id, nar.hash, second, one(nar.nar.subarray(second))), nar.nar.length, 'B appends the next chunk');
    const outcome = await finalize(b, nar);
    t.equal(outcome.status, 'added');
    t.equal(outcome.narHash, nar.info.narHash);
    const stored = await storedNar(outcome.fileHash);
    t.ok(stored.nar.equals(nar.nar), 'the stored file is the NAR');
    t.equal(stored.fileHash, outcome.fileHash, 'and its FileHash is the hash of the stored bytes');
    t.equal(await rowOf(c.id, nar.hash), null, 'the staged upload is gone');
  });

  t.test('a process that died holding the claim blocks nobody', async (t) => {
    const a = await open(t, 'a2');
    const b = await open(t, 'b2');
    const c = await cache('died');
    const nar = await makeTestNar(t, { a: randomBytes(3 << 20), b: 'small\n' }, [], 'died');
    const first = 1 << 20;
    t.equal(await a.nars.uploads.appendChunk(c.id, nar.hash, 0, one(nar.nar.subarray(0, first))), first);
    const held = heldBody(nar.nar.subarray(first, first + 4096), nar.nar.subarray(first + 4096));
    const appending = a.nars.uploads.appendChunk(c.id, nar.hash, first, held.body);
    await held.reading;
    await t.rejects(b.nars.uploads.appendChunk(c.id, nar.hash, first, one(nar.nar.subarray(first))), isInProgress(true), 'refused while A lives');

    // A dies: PostgreSQL ends its sessions (the lease among them), as after SIGKILL.
    const killed = await sql<{ ended: boolean }[]>`
      select pg_terminate_backend(s.pid, 10000) as ended
      from (select pid from pg_stat_activity where application_name = 'kiln-test-a2') s`;
    t.ok(killed.length >= 1 && killed.every((k) => k.ended), "A's sessions are ended");
    const [lock] = await sql<{ held: boolean }[]>`
      select exists (select from pg_locks where locktype = 'advisory' and classid = ${LEASE_NAMESPACE}::int::oid and objid = ${a.leaseKey}::int::oid) as held`;
    t.equal(lock?.held, false, "A's lease is gone");
    await a.sql.end({ timeout: 0 });
    // Its half-written chunk ends with it; it can no longer give the claim up.
    held.finish({ fail: new Error('the process is gone') });
    await t.rejects(appending, { message: 'the process is gone' });
    t.same(await rowOf(c.id, nar.hash), { bytes_staged: String(first), writer: a.leaseKey }, "the dead process's claim is still on the row");

    t.equal(await b.nars.uploads.appendChunk(c.id, nar.hash, first, one(nar.nar.subarray(first))), nar.nar.length, 'B resumes where the row stands');
    const outcome = await b.nars.uploads.finalize({ cacheId: c.id, uploadKey: nar.hash, signingKey: c.key, info: nar.info });
    t.equal(outcome.narHash, nar.info.narHash);
    t.ok((await storedNar(outcome.fileHash)).nar.equals(nar.nar), 'the stored file is the NAR');
  });

  t.test('a second request in the same process is refused without the database', async (t) => {
    const a = await open(t, 'a3');
    const c = await cache('same');
    const nar = await makeTestNar(t, { a: randomBytes(1 << 20), b: 'small\n' }, [], 'same');
    const held = heldBody(nar.nar.subarray(0, 4096), nar.nar.subarray(4096));
    const appending = a.nars.uploads.appendChunk(c.id, nar.hash, 0, held.body);
    await held.reading;
    const second = untouchedBody(nar.nar);
    await t.rejects(a.nars.uploads.appendChunk(c.id, nar.hash, 0, second.body), isInProgress(false), 'a second chunk');
    await t.rejects(a.nars.uploads.finalize({ cacheId: c.id, uploadKey: nar.hash, signingKey: c.key, info: nar.info }), isInProgress(false), 'a finalize');
    t.equal(second.state.read, false);
    held.finish({});
    t.equal(await appending, nar.nar.length);
    const outcome = await a.nars.uploads.finalize({ cacheId: c.id, uploadKey: nar.hash, signingKey: c.key, info: nar.info });
    t.ok((await storedNar(outcome.fileHash)).nar.equals(nar.nar), 'the stored file is the NAR');
  });

  t.test('nix copy NAR files put whole are claimed too', async (t) => {
    const a = await open(t, 'a4');
    const b = await open(t, 'b4');
    const c = await cache('whole');
    const nar = await makeTestNar(t, { a: randomBytes(1 << 20) }, [], 'whole');
    const key = `nar/${'1'.repeat(52)}.nar`;
    // A holds the upload (its claim set here as a request of A sets it): B's whole file is refused and lands nowhere.
    t.equal(await a.nars.uploads.stageWhole(c.id, key, 'none', one(nar.nar)), nar.nar.length);
    await a.sql`update staged_uploads set writer = ${a.leaseKey} where upload_key = ${key}`;
    await t.rejects(b.nars.uploads.stageWhole(c.id, key, 'none', one(randomBytes(4096))), isInProgress(true));
    t.ok((await readFile(stagedFile(c.id, key))).equals(nar.nar), "A's file is still staged");
    t.same(await rowOf(c.id, key), { bytes_staged: String(nar.nar.length), writer: a.leaseKey });
    await a.sql`update staged_uploads set writer = null where upload_key = ${key}`;
    t.equal(await b.nars.uploads.stageWhole(c.id, key, 'none', one(nar.nar)), nar.nar.length, 'free again: B replaces it');
    t.same(await rowOf(c.id, key), { bytes_staged: String(nar.nar.length), writer: null }, 'and gives the claim up');
  });
});
