// The debug build-ID index (cache.debugIndexIntervalSecs; docs/binary-cache.md, "Debug info"):
// GET /cache/{cache}/debuginfo/{build_id} answers what Nix's index-debug-info writes for a build ID,
// {"archive": "../nar/<file>.nar.zst", "member": "lib/debug/.build-id/…"}, from the paths the cache
// holds, so debuginfod clients (dwarffs, nixseparatedebuginfod) find debug symbols without the
// uploader indexing anything. Uploads are indexed in their commit (storage/nars/commitIngest.ts);
// the backfill looks through paths stored before the index existed.
import type { Sql } from 'postgres';
import { narUrl } from '../../protocol/index.js';
import { findDebugInfo, indexDebugBuildIds, unindexedCachedPaths } from '../../storage/index.js';

const SLICE = 200;
/** Nix 2.8's index-debug-info names the document `<build id>.debug`; debuginfod clients ask without the suffix. Both are served. */
const BUILD_ID = /^([0-9a-f]{40})(?:\.debug)?$/;

export interface DebugIndexReport {
  /** cached paths looked through */
  paths: number;
  /** build IDs found in them */
  buildIds: number;
}

/** One backfill pass: every cached path not looked through yet, in slices of one short transaction each. */
export async function runDebugIndexBackfill(sql: Sql, sliceSize = SLICE): Promise<DebugIndexReport> {
  const report: DebugIndexReport = { paths: 0, buildIds: 0 };
  for (;;) {
    const slice = await unindexedCachedPaths(sql, sliceSize);
    if (slice.length === 0) return report;
    await sql.begin(async (tx) => {
      for (const path of slice) report.buildIds += await indexDebugBuildIds(tx, path.id, path.listing);
    });
    report.paths += slice.length;
    if (slice.length < sliceSize) return report;
  }
}

/** The debuginfo/{build_id} document for a build ID among the cache's paths, or null (then the upstreams are asked). */
export async function debugInfoDocument(sql: Sql, cacheId: string, buildId: string): Promise<{ archive: string; member: string } | null> {
  const id = BUILD_ID.exec(buildId)?.[1];
  if (id === undefined) return null;
  const found = await findDebugInfo(sql, cacheId, id);
  return found === null ? null : { archive: `../${narUrl(found.fileHash)}`, member: found.member };
}
