// The REST NAR upload API's shapes: the JSON narinfo, its check by the narinfo rules, and the answer.
import { z } from 'zod';
import { DEFAULT_STORE_DIR, parseNarinfo, type Narinfo, type Parsed } from '../nix/index.js';

// The REST upload API's narinfo: the `narinfo` part of POST /caches/{cache}/nars and the body of
// POST /caches/{cache}/nars/{hash}/finalize. JSON with the narinfo's fields in snake_case;
// references and deriver may be base names (<hash>-<name>) or full store paths.
export const NarUploadInfo = z.object({
  store_path: z.string().min(1).max(400),
  nar_hash: z.string().min(1).max(200),
  nar_size: z.number().int().positive(),
  references: z.array(z.string().min(1).max(400)).max(100_000).default([]),
  deriver: z.string().max(400).nullish(),
  ca: z.string().max(300).nullish(),
});
export type NarUploadInfo = z.infer<typeof NarUploadInfo>;

/** A store path's hash part, as in `/caches/{cache}/nars/{hash}/…` and `{hash}.narinfo`. */
export const StorePathHash = z.string().regex(/^[0-9a-df-np-sv-z]{32}$/, 'expected a store path hash part: 32 nix32 characters');

/** What an upload ends with (POST …/nars, POST …/nars/{hash}/finalize). */
export const NarUploadResult = z.strictObject({
  store_path: z.string(),
  nar_hash: z.string(),
  nar_size: z.number().int(),
  /** nix32 SHA-256 of the stored zstd file; the NAR is served at nar/<file_hash>.nar.zst */
  file_hash: z.string(),
  file_size: z.number().int(),
  /** added: stored and signed now; held: the cache already held this NAR */
  status: z.enum(['added', 'held']),
});
export type NarUploadResult = z.infer<typeof NarUploadResult>;

/** PUT …/nars/{hash}/chunk: what is staged after this chunk (the next chunk's ?offset=). */
export const ChunkAppendedView = z.strictObject({ bytes_staged: z.number().int() });
export type ChunkAppendedView = z.infer<typeof ChunkAppendedView>;

/** GET …/nars/{hash}/upload: a staged upload's length and when it last grew. */
export const StagedUploadView = z.strictObject({ bytes_staged: z.number().int(), updated_at: z.iso.datetime({ offset: true }) });
export type StagedUploadView = z.infer<typeof StagedUploadView>;

/** DELETE …/nars/{hash}/upload: whether there was a staged upload to abandon. */
export const UploadAbandonedView = z.strictObject({ abandoned: z.boolean() });
export type UploadAbandonedView = z.infer<typeof UploadAbandonedView>;

const JSON_FIELD: Record<string, string> = {
  StorePath: 'store_path', NarHash: 'nar_hash', NarSize: 'nar_size', References: 'references', Deriver: 'deriver', CA: 'ca',
};

const baseName = (path: string, storeDir: string): string => (path.startsWith(`${storeDir}/`) ? path.slice(storeDir.length + 1) : path);

/** The JSON narinfo checked by the same rules as a narinfo file; a failure names the JSON field. */
export function narinfoOfUpload(info: NarUploadInfo, storeDir = DEFAULT_STORE_DIR): Parsed<Narinfo> {
  const oneLine = (value: string) => value.replace(/[\r\n]/g, ' ');
  const lines = [
    `StorePath: ${oneLine(info.store_path)}`,
    'URL: upload',
    `NarHash: ${oneLine(info.nar_hash)}`,
    `NarSize: ${info.nar_size}`,
    `References: ${info.references.map((r) => oneLine(baseName(r, storeDir))).join(' ')}`,
  ];
  if (info.deriver) lines.push(`Deriver: ${oneLine(baseName(info.deriver, storeDir))}`);
  if (info.ca) lines.push(`CA: ${oneLine(info.ca)}`);
  const parsed = parseNarinfo(`${lines.join('\n')}\n`, storeDir);
  if (parsed.ok) return { ok: true, value: { ...parsed.value, compression: 'none' } };
  return { ok: false, field: JSON_FIELD[parsed.field] ?? parsed.field, reason: parsed.reason };
}
