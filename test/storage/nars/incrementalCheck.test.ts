// The check pass that runs as chunks arrive (stagedChecks.ts) reads every chunk into one reused
// buffer: it must judge a NAR exactly as the full pass over the staged file does. A kept entry
// name that was a view of that buffer once made a well-formed directory spanning two reads look
// unsorted, and let an unsorted one through to be stored and signed.
import { createHash, randomBytes } from 'node:crypto';
import t, { type Test } from 'tap';
import { createCpuPool } from '../../../storage/index.js';
import { sha256Nix32 } from '../../../protocol/index.js';
import { STORED_ZSTD_LEVEL } from '../../../storage/nars/ingest.js';
import { stagingArea } from '../../../storage/nars/narLocations.js';
import { NarFrameSets } from '../../../storage/nars/narFrameSets.js';
import type { NarReads } from '../../../storage/nars/narReads.js';
import { narUploads } from '../../../storage/nars/narUploads.js';
import { StagedChecks } from '../../../storage/nars/stagedChecks.js';
import { directoryNar } from '../../support/narBytes.js';
import { makeTestNar, openTestNarStorage, testInstanceLease } from '../../support/narStorage.js';

const one = (bytes: Uint8Array) => [bytes] as unknown as AsyncIterable<Uint8Array>;

async function setup(t: Test) {
  const { sql, url, blobs, baseDir, cache } = await openTestNarStorage(t, 'fs');
  const staging = stagingArea(baseDir);
  // One kiln process's uploads; a second call is another process on the same database and disk.
  const process = async () => {
    const leaseKey = await testInstanceLease(t, url);
    const cpu = createCpuPool({ maxThreads: 1 });
    const checks = StagedChecks.open();
    const uploads = narUploads({
      sql, blobs, cpu, staging, frames: new NarFrameSets(cpu, STORED_ZSTD_LEVEL), checks,
      reads: { forget: () => undefined } as unknown as NarReads, maxUploadSize: 64 << 20, leaseKey,
    });
    t.teardown(async () => {
      await checks.close();
      await cpu.destroy();
    });
    return { uploads, checks };
  };
  return { ...(await process()), process, staging, cache };
}

t.test('the incremental check accepts a well-formed NAR whose directory spans reads', async (t) => {
  const { uploads, checks, staging, cache: makeCache } = await setup(t);
  const cache = await makeCache('spans');
  const nar = await makeTestNar(t, { a: randomBytes(2 << 20), b: 'small\n' }, [], 'spans');
  await uploads.appendChunk(cache.id, nar.hash, 0, one(nar.nar));
  const row = await uploads.staged(cache.id, nar.hash);
  const result = await checks.result(staging.framesDir(cache.id, nar.hash, row!.createdAt), nar.nar.length);
  t.ok(result, 'the check that ran as the chunk arrived is usable at finalize');
  t.equal(result?.narHash, nar.info.narHash);
});

t.test('a NAR with unsorted entries is refused, as the full pass refuses it', async (t) => {
  const { uploads, process, cache: makeCache } = await setup(t);
  const cache = await makeCache('unsorted');
  // "b" before "a": not canonical. "b"'s 2 MiB of zeros overwrite the reused read buffer where
  // the view of the name "b" points, so the order check compares "\0" with "a".
  const bytes = directoryNar([['b', Buffer.alloc(2 << 20)], ['a', Buffer.from('x\n')]]);
  const hash = '0000000123456789abcdfghijklmnpqr';
  const info = {
    storePath: `/nix/store/${hash}-unsorted`, url: 'upload', compression: 'none',
    narHash: sha256Nix32(createHash('sha256').update(bytes).digest()), narSize: bytes.length, references: [], sigs: [],
  };
  await uploads.appendChunk(cache.id, hash, 0, one(bytes));
  // Another process (no state: the full pass) refuses these bytes.
  await t.rejects((await process()).uploads.finalize({ cacheId: cache.id, uploadKey: hash, signingKey: cache.key, info }), { kind: 'invalid_nar', message: /entries not sorted/ });
  const outcome = await uploads.finalize({ cacheId: cache.id, uploadKey: hash, signingKey: cache.key, info }).then(
    (o) => `stored and signed as ${o.narHash}`,
    (e: Error) => `refused: ${e.message}`,
  );
  t.match(outcome, /^refused: .*entries not sorted/);
});
