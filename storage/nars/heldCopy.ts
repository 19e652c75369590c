// Whether an upload is a repeat of the copy a cache holds. A repeat needs no work (a retry after a
// lost answer, `nix copy` of a path the cache has); an upload of the same NAR saying something else
// about it (name, references, deriver, CA) is a new narinfo and replaces the cache's own copy.
import type { Narinfo } from '../../protocol/index.js';
import type { IngestOutcome } from './ingestOutcome.js';
import type { HeldPath } from './sql/index.js';

/** Whether the held copy is this NAR with exactly this narinfo, as ingest would store it. */
export function holdsExactly(held: HeldPath, info: Narinfo): boolean {
  const references = [...info.references].sort();
  return held.narHash === info.narHash
    && held.storePath === info.storePath
    && (held.deriver ?? undefined) === info.deriver
    && (held.ca ?? undefined) === info.ca
    && held.references.length === references.length
    && held.references.every((ref, i) => ref === references[i]);
}

/** The outcome of an upload that found its copy already held. */
export const heldOutcome = (held: HeldPath): IngestOutcome => ({
  storePath: held.storePath, narHash: held.narHash, narSize: held.narSize, fileHash: held.fileHash, fileSize: held.fileSize, status: 'held',
});
