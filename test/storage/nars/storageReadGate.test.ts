// The storage read gate (nar.maxConcurrentDownloads, nar.maxConcurrentServes,
// nar.storageOpenTimeoutSecs) over real files of a filesystem blob store.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { FilesystemBlobStore, isStorageBusy, type BlobRead } from '../../../storage/index.js';
import { ReaderTooSlow } from '../../../storage/nars/readPace.js';
import { StorageReadGate } from '../../../storage/nars/storageReadGate.js';

t.test('the storage read gate', async (t) => {
  const blobs = new FilesystemBlobStore(mkdtempSync(join(tmpdir(), 'kiln-gate-')));
  await blobs.put('a', (async function* () { yield Buffer.alloc(4096, 7); })(), 4096);
  const open = () => blobs.get('a');
  const drain = async (read: BlobRead | null) => {
    let bytes = 0;
    for await (const chunk of read!.body) bytes += chunk.byteLength;
    return bytes;
  };
  const settled = async (p: Promise<unknown>) => {
    let done = false;
    void p.then(() => (done = true), () => (done = true));
    // Any already-possible hand-over, and the file open it leads to (thread-pool I/O), has happened
    // within 100 ms; a few event-loop turns were not always enough for the open under load.
    for (let i = 0; i < 20 && !done; i++) await new Promise((resolve) => setTimeout(resolve, 5));
    return done;
  };

  t.test('at most maxReads run at once; the next starts when one ends', async (t) => {
    const gate = new StorageReadGate({ maxReads: 2, maxReadsPerWorker: 8, openTimeoutSecs: 60 });
    const first = await gate.open(open);
    const second = await gate.open(open);
    const third = gate.open(open);
    t.notOk(await settled(third), 'the third read waits while two are open');
    t.equal(await drain(first), 4096, 'a read gives its place back when its body ends');
    const read = await third;
    t.ok(read, 'then the third starts');
    second!.cancel();
    t.equal(await drain(read), 4096);
    t.ok(await gate.open(open).then((r) => (r!.cancel(), true)), 'every place is free again');
  });

  t.test('one worker holds at most maxReadsPerWorker; others are not held up by it', async (t) => {
    const gate = new StorageReadGate({ maxReads: 8, maxReadsPerWorker: 1, openTimeoutSecs: 60 });
    const held = await gate.open(open, '10.0.0.1');
    const sameWorker = gate.open(open, '10.0.0.1');
    t.notOk(await settled(sameWorker), 'a second read of the same worker waits');
    const other = await gate.open(open, '10.0.0.2');
    t.ok(other, 'another worker reads meanwhile');
    const anonymous = await gate.open(open);
    t.ok(anonymous, 'so does a request from no worker');
    held!.cancel();
    t.ok(await sameWorker, 'the waiting read starts once the worker\'s own read ends');
  });

  t.test('a read that cannot start within openTimeoutSecs fails with StorageBusy and holds nothing', async (t) => {
    const gate = new StorageReadGate({ maxReads: 1, maxReadsPerWorker: 8, openTimeoutSecs: 1 });
    const held = await gate.open(open);
    const refused = await gate.open(open).then(() => null, (e: unknown) => e);
    t.ok(isStorageBusy(refused), 'refused with StorageBusy');
    held!.cancel();
    const next = await gate.open(open);
    t.ok(next, 'the refused read left no place taken');
    next!.cancel();
  });

  t.test('a store slower than openTimeoutSecs to hand over the stream: StorageBusy, and the late stream is cancelled', async (t) => {
    const gate = new StorageReadGate({ maxReads: 1, maxReadsPerWorker: 8, openTimeoutSecs: 1 });
    let cancelled = false;
    const slowOpen = () => new Promise<BlobRead>((resolve) => setTimeout(() => resolve({
      size: 1, range: null, body: (async function* () { yield Buffer.from('x'); })(), cancel: () => { cancelled = true; },
    }), 1500));
    const refused = await gate.open(slowOpen).then(() => null, (e: unknown) => e);
    t.ok(isStorageBusy(refused));
    await new Promise((resolve) => setTimeout(resolve, 700));
    t.ok(cancelled, 'the stream that came too late was let go');
    const next = await gate.open(open);
    t.ok(next, 'and its place is free');
    next!.cancel();
  });

  t.test('a reader that went away leaves the line at once: it neither opens the blob nor holds up the next reader', async (t) => {
    const gate = new StorageReadGate({ maxReads: 1, maxReadsPerWorker: 1, openTimeoutSecs: 60 });
    const held = await gate.open(open);
    let ghostOpens = 0;
    const ghosts = Array.from({ length: 3 }, (_, i) => {
      const client = new AbortController();
      const read = gate.open(() => (ghostOpens++, open()), i === 0 ? 'w' : undefined, client.signal);
      read.catch(() => undefined);
      return { client, read };
    });
    t.notOk(await settled(ghosts[0]!.read), 'waiting for a place');
    for (const ghost of ghosts) ghost.client.abort();
    for (const ghost of ghosts) t.ok(await settled(ghost.read), 'an aborted reader stops waiting');
    await t.rejects(ghosts[0]!.read, { name: 'ReaderGone' }, 'refused as gone, not as storage busy');
    held!.cancel();
    const next = gate.open(open, 'w');
    t.ok(await settled(next), 'the next reader (even of the same worker) gets the freed place at once');
    t.equal(ghostOpens, 0, 'nothing was opened for the readers that left');
    (await next)!.cancel();
    const gone = new AbortController();
    gone.abort();
    await t.rejects(gate.open(open, undefined, gone.signal), { name: 'ReaderGone' }, 'a reader gone before asking is refused without a place');
    t.ok(await gate.open(open).then((r) => (r!.cancel(), true)), 'every place is free');
  });

  t.test('a missing blob or a failing open gives the place back', async (t) => {
    const gate = new StorageReadGate({ maxReads: 1, maxReadsPerWorker: 1, openTimeoutSecs: 60 });
    t.equal(await gate.open(() => blobs.get('missing'), 'w'), null);
    await t.rejects(gate.open(() => Promise.reject(new Error('disk on fire')), 'w'), /disk on fire/);
    const next = await gate.open(open, 'w');
    t.ok(next, 'nothing stayed taken');
    next!.cancel();
  });

  t.test('a reader slower than the minimum pace loses its place at the next check, and its body ends', async (t) => {
    await blobs.put('big', (async function* () { for (let i = 0; i < 8; i++) yield Buffer.alloc(1 << 20, i); })(), 8 << 20);
    const gate = new StorageReadGate({ maxReads: 1, maxReadsPerWorker: 8, openTimeoutSecs: 60, pace: { minBytesPerSec: 64 << 20, checkMs: 200 } });
    const slow = await gate.open(() => blobs.get('big'));
    const body = slow!.body[Symbol.asyncIterator]();
    t.notOk((await body.next()).done, 'one chunk pulled, then the reader dawdles');
    const next = gate.open(() => blobs.get('a'));
    const freed = await next;
    t.ok(freed, 'after a check the place went to the next reader');
    freed!.cancel();
    await t.rejects(body.next(), ReaderTooSlow, 'the slow body ends with ReaderTooSlow');
  });

  t.test('a reader at pace keeps its place to the end', async (t) => {
    const gate = new StorageReadGate({ maxReads: 1, maxReadsPerWorker: 8, openTimeoutSecs: 60, pace: { minBytesPerSec: 1024, checkMs: 50 } });
    const read = await gate.open(() => blobs.get('big'));
    let bytes = 0;
    for await (const chunk of read!.body) {
      bytes += chunk.byteLength;
      await new Promise((resolve) => setTimeout(resolve, 60));
    }
    t.equal(bytes, 8 << 20, 'every byte, across several checks');
  });
});
