// `nix-store --export`'s format (libstore/export-import.cc) read from a protocol stream, as the
// serve protocol's ImportPaths sends it: per path a 1, its NAR (no length before it: the NAR's
// own structure says where it ends), then the trailer: the magic "NIXE", the path, its
// references, its deriver ("" for none) and a legacy signature flag (1 followed by a signature
// that is read and dropped, or 0); a final 0 ends the stream. nixExport.ts reads the same format
// from memory.
import { isNarError } from './narError.js';
import { NarParser } from './narParser.js';
import { WireError, type WireReader } from './workerWire.js';

export const EXPORT_MAGIC = 0x4558494e;
const MAX_TRAILER_REFERENCES = 100_000;

export interface ExportTrailer {
  path: string;
  references: string[];
  /** "" when the path has none */
  deriver: string;
}

/** Whether another path follows (its NAR next); false at the stream's end. */
export async function nextExportedPath(from: WireReader): Promise<boolean> {
  const marker = await from.u64();
  if (marker === 0) return false;
  if (marker !== 1) throw new WireError(`expected 1 (a path follows) or 0 (the end), got ${marker}: not the nix-store --export format`);
  return true;
}

/**
 * The NAR's bytes as they arrive, never one past its end; a WireError when they are not a NAR,
 * exceed `maxNarSize`, or the stream ends inside it. (Only its structure is checked here; the
 * ingest checks the rest.)
 */
export async function* exportedNar(from: WireReader, maxNarSize: number): AsyncGenerator<Uint8Array> {
  const parser = new NarParser({}, { maxNarSize });
  while (!parser.done) {
    const chunk = await from.some(Math.min(parser.wants, 1 << 20));
    try {
      parser.push(chunk);
    } catch (e) {
      throw isNarError(e) ? new WireError(`the NAR of an exported path: ${e.message}`) : e;
    }
    yield chunk;
  }
}

/** The trailer after a path's NAR. */
export async function readExportTrailer(from: WireReader): Promise<ExportTrailer> {
  const magic = await from.u64();
  if (magic !== EXPORT_MAGIC) throw new WireError(`the NAR is not followed by the export magic (got ${magic}): not the nix-store --export format`);
  const path = await from.string();
  const references = await from.strings(MAX_TRAILER_REFERENCES);
  const deriver = await from.string();
  const signed = await from.u64();
  if (signed === 1) await from.string(); // a legacy signature: the cache signs with its own key
  else if (signed !== 0) throw new WireError(`the legacy signature flag is ${signed}, not 0 or 1`);
  return { path, references, deriver };
}
