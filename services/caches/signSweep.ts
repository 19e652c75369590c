// The NAR signature backfill (cache.signSweepIntervalSecs; docs/binary-cache.md, "Key rotation"):
// every path a cache holds gets a signature by the cache's current key, and while a previous key
// is listed, one by that key too (so clients trusting either key keep working); once the previous
// key's overlap has ended its signatures leave the rows and the key goes. Uploads are signed at
// once by the ingest; the sweep catches up after a rotation and with anything signed by a key the
// cache no longer has (an ingest that read the key just before a rotation committed).
//
// Each cache is walked in primary key order in slices, each slice one short statement, so a sweep
// over a million paths holds no lock that narinfo serving waits on. A row an upload changed between
// the read and the write is skipped (writeSignatures) and found by the next pass. Several server
// processes may sweep at once: the writes are idempotent.
import type { Sql } from 'postgres';
import { signNarinfo, type SigningKey } from '../../protocol/index.js';
import { cacheKeyNames, endedPreviousKeys, endPreviousKey, findSignatureWork, writeSignatures, type NarReads, type SignatureWork, type SignatureWrite } from '../../storage/index.js';
import type { CacheSigningKeys } from './cacheSigningKeys.js';

export interface SignSweepDeps {
  /** the binary cache's pool */
  sql: Sql;
  keys: CacheSigningKeys;
  /** this process forgets the narinfos it re-signed at once; other processes within their TTL */
  reads: Pick<NarReads, 'forget'>;
  /** rows per slice */
  sliceSize?: number;
}

export interface SignSweepReport {
  /** signature rows rewritten */
  signed: number;
  /** previous keys whose overlap had ended, removed */
  keysEnded: number;
  /** rows whose narinfo cannot be signed (a NarHash that is not sha256): left as they are, every pass */
  unsignable: number;
}

const SLICE = 500;

const signedBy = (signature: string | null, key: SigningKey | null): boolean =>
  signature !== null && key !== null && signature.startsWith(`${key.name}:`);

/** The signatures a row should carry under the cache's keys now. */
export function resign(row: SignatureWork, current: SigningKey, previous: SigningKey | null): SignatureWrite {
  const fields = { storePath: row.storePath, narHash: row.narHash, narSize: row.narSize, references: row.references };
  let signature = row.signature;
  let previousSignature = row.previousSignature;
  if (!signedBy(signature, current)) {
    // The upload's own signature by the key just rotated out is still good as the previous one.
    if (signedBy(signature, previous)) previousSignature = signature;
    signature = signNarinfo(fields, current);
  }
  if (previous === null) previousSignature = null;
  else if (!signedBy(previousSignature, previous)) previousSignature = signNarinfo(fields, previous);
  return { hashPart: row.hashPart, cachedPathId: row.cachedPathId, readSignature: row.signature, signature, previousSignature };
}

/** One pass over every cache; `now` decides which previous keys are still listed. */
export async function runSignSweep(deps: SignSweepDeps, now: Date): Promise<SignSweepReport> {
  const { sql, keys, reads } = deps;
  const slice = deps.sliceSize ?? SLICE;
  const report: SignSweepReport = { signed: 0, keysEnded: 0, unsignable: 0 };
  for (const cache of await cacheKeyNames(sql, now)) {
    // Opened on the first slice with work: a sweep over caches with nothing to do opens no key.
    let opened: { current: SigningKey; previous: SigningKey | null } | null = null;
    let after = '';
    for (;;) {
      const work = await findSignatureWork(sql, { cacheId: cache.id, keyName: cache.key_name, previousKeyName: cache.previous_key_name, after, limit: slice });
      if (work.length === 0) break;
      opened ??= { current: await keys.of(cache.id), previous: await keys.previous(cache.id, now) };
      // A rotation after cacheKeyNames was read: the next pass (which the rotation wakes) does this cache.
      if (opened.current.name !== cache.key_name || (opened.previous?.name ?? null) !== cache.previous_key_name) break;
      const { current, previous } = opened;
      // One row that cannot be signed must not stop the sweep of every other row after it.
      const writes = work.flatMap((row) => {
        try {
          return [resign(row, current, previous)];
        } catch {
          report.unsignable++;
          return [];
        }
      });
      const written = await writeSignatures(sql, cache.id, writes);
      for (const hashPart of written) reads.forget(cache.id, hashPart);
      report.signed += written.length;
      if (work.length < slice) break;
      after = work[work.length - 1]!.hashPart;
    }
  }
  // The walk above already took their signatures off (a key not listed at `now` is no previous key).
  for (const ended of await endedPreviousKeys(sql, now)) {
    await endPreviousKey(sql, ended.cache_id, ended.key_name);
    report.keysEnded++;
  }
  return report;
}

