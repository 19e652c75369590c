// One collection pass (docs/gc.md, "Passes"): the live set, paths past their TTL, caches over
// their storage limits, orphan derivations; gc.swept per cache and reason. Paths are removed in
// pages, each in a transaction that checks every rule again; blobs go after, under the file lock.
import { performance } from 'node:perf_hooks';
import {
  cacheNames, cachesOverLimit, computeLiveSet, deleteBlobsIfUnreferenced, deleteOrphanDerivations, instanceExcessBytes, leastRecentlyUsed, markOrphanDerivations,
  pathsPastTtl, removePaths, retainedEvaluationIds, STORAGE_GB, topUpLiveSet, type PathKey, type RemovedPath, type TtlRules,
} from '../../storage/index.js';
import { markManyOutputsNotCached } from '../caches/index.js';
import type { GcDeps } from './gcDeps.js';

const PAGE = 1000;

export type SweepReason = 'ttl' | 'storage' | 'missing_blob';

export interface CacheSweep {
  cache: string;
  reason: SweepReason;
  paths: number;
  /** stored (zstd) bytes of the removed copies: what the cache's storage counts */
  bytes: number;
}

export interface PassResult {
  live_paths: number;
  pinned_paths: number;
  /** per cache and reason */
  caches: CacheSweep[];
  paths: number;
  bytes: number;
  derivations: number;
  log_bytes: number;
  duration_ms: number;
  /** where the time went: the live set, the TTL pages (top-ups included), storage limits, orphan derivations */
  phases_ms: { live_set: number; ttl: number; storage: number; derivations: number };
}

/** Counts removed copies per cache and reason. */
export class SweepTally {
  private readonly counts = new Map<string, { cacheId: string; reason: SweepReason; paths: number; bytes: number }>();

  add(removed: readonly RemovedPath[], reason: SweepReason): void {
    for (const path of removed) {
      const key = `${path.cacheId}/${reason}`;
      const entry = this.counts.get(key) ?? { cacheId: path.cacheId, reason, paths: 0, bytes: 0 };
      entry.paths++;
      entry.bytes += path.fileSize;
      this.counts.set(key, entry);
    }
  }

  /** With cache names; a cache deleted meanwhile is left out. */
  async named(deps: Pick<GcDeps, 'sql'>): Promise<(CacheSweep & { cacheId: string })[]> {
    const entries = [...this.counts.values()];
    const names = await cacheNames(deps.sql, [...new Set(entries.map((e) => e.cacheId))]);
    return entries.flatMap((e) => {
      const cache = names.get(e.cacheId);
      return cache === undefined ? [] : [{ cacheId: e.cacheId, cache, reason: e.reason, paths: e.paths, bytes: e.bytes }];
    });
  }
}

/** Files whose locks one transaction takes at most (advisory locks share the server's lock table). */
const BLOB_BATCH = 200;

/**
 * After the commit: this process forgets the removed copies at once (other processes within the
 * hot cache's lifetime), and the NAR files no row points at any more are deleted under their locks.
 */
export async function settleRemoved(deps: Pick<GcDeps, 'sql' | 'nars' | 'log'>, removed: readonly RemovedPath[]): Promise<void> {
  for (const path of removed) deps.nars.reads.forget(path.cacheId, path.hashPart, path.fileHash);
  const files = [...new Set(removed.map((p) => p.fileHash))];
  for (let i = 0; i < files.length; i += BLOB_BATCH) {
    await deleteBlobsIfUnreferenced(deps.sql, deps.nars.blobs, files.slice(i, i + BLOB_BATCH))
      .catch((err: unknown) => deps.log.warn({ err }, 'could not delete collected NAR files; the deep round removes them later'));
  }
}

/** Emits gc.swept for each cache and reason, in one transaction. */
export async function emitSwept(deps: Pick<GcDeps, 'events'>, sweeps: readonly (CacheSweep & { cacheId: string })[], derivations?: { count: number; logBytes: number }): Promise<void> {
  if (sweeps.length === 0 && (derivations === undefined || derivations.count === 0)) return;
  await deps.events.transaction(async (_tx, emit) => {
    for (const s of sweeps) emit('gc.swept', { cache: s.cache, reason: s.reason, paths: s.paths, bytes: s.bytes }, { cacheId: s.cacheId });
    if (derivations !== undefined && derivations.count > 0) emit('gc.swept', { reason: 'derivations', paths: derivations.count, bytes: derivations.logBytes });
  });
}

export async function runCollectionPass(deps: GcDeps): Promise<PassResult> {
  const { sql, config } = deps;
  const t0 = performance.now();
  const startedAt = deps.clock.now();
  const retained = retainedEvaluationIds(sql, { maxKeep: config['eval.maxKeep'], wedgedEvalHours: config['gc.wedgedEvalHours'], now: startedAt });
  const live = await computeLiveSet(sql, retained, startedAt, startedAt);
  const tLive = performance.now();
  const tally = new SweepTally();

  const remove = async (keys: readonly PathKey[], ttl: TtlRules | null, reason: SweepReason): Promise<void> => {
    // What evaluations recorded while the pass ran is live too.
    await topUpLiveSet(sql, true);
    const removed = await deps.events.transaction(async (tx) => {
      const gone = await removePaths(tx, keys, ttl);
      await markManyOutputsNotCached(tx, gone.filter((p) => p.lastCopy));
      return gone;
    });
    tally.add(removed, reason);
    if (removed.length > 0) await deps.crashPoints?.('gc.pass.pageRemoved');
    await settleRemoved(deps, removed);
  };

  const ttl: TtlRules = { now: startedAt, ttlHours: config['gc.narTtlHours'], graceHours: config['gc.narUploadGraceHours'] };
  for await (const page of pathsPastTtl(sql, ttl, PAGE)) await remove(page, ttl, 'ttl');
  const tTtl = performance.now();
  const evict = async (cacheId: string | null, bytes: number): Promise<void> => {
    const keys = await leastRecentlyUsed(sql, cacheId, bytes);
    for (let i = 0; i < keys.length; i += PAGE) await remove(keys.slice(i, i + PAGE), null, 'storage');
  };
  for (const over of await cachesOverLimit(sql)) await evict(over.cacheId, over.excessBytes);
  const instanceMax = config['cache.maxStorageGb'] > 0 ? config['cache.maxStorageGb'] * STORAGE_GB : null;
  await evict(null, await instanceExcessBytes(sql, instanceMax));
  const tStorage = performance.now();
  await markOrphanDerivations(sql, retained, startedAt);
  const markedBefore = new Date(startedAt.getTime() - config['gc.orphanDerivationHours'] * 3600_000);
  let derivations = 0;
  let logBytes = 0;
  for (;;) {
    const batch = await deleteOrphanDerivations(sql, retained, markedBefore, PAGE);
    derivations += batch.derivations;
    logBytes += batch.logBytes;
    if (batch.examined < PAGE) break;
  }
  const tDerivations = performance.now();
  const sweeps = await tally.named(deps);
  await emitSwept(deps, sweeps, { count: derivations, logBytes });
  return {
    live_paths: live.livePaths,
    pinned_paths: live.pinnedPaths,
    caches: sweeps.map(({ cache, reason, paths, bytes }) => ({ cache, reason, paths, bytes })),
    paths: sweeps.reduce((n, s) => n + s.paths, 0),
    bytes: sweeps.reduce((n, s) => n + s.bytes, 0),
    derivations,
    log_bytes: logBytes,
    duration_ms: Math.round(performance.now() - t0),
    phases_ms: {
      live_set: Math.round(tLive - t0), ttl: Math.round(tTtl - tLive), storage: Math.round(tStorage - tTtl), derivations: Math.round(tDerivations - tStorage),
    },
  };
}
