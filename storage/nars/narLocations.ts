// Where NAR bytes live: the blob key of a stored NAR, and the staging area under <baseDir> for
// uploads that are not ingested yet. Staging sits next to <baseDir>/blobs on purpose: the
// filesystem blob store then takes an ingested file over with one rename (docs/storage.md).
import { createHash, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { narUrl } from '../../protocol/index.js';

/** `nar/<nix32 file hash>.nar.zst`: the narinfo URL and the blob key are the same string. */
export const narBlobKey: (fileHash: string) => string = narUrl;

export interface StagingArea {
  /** `<baseDir>/staging` */
  readonly root: string;
  /** The staged bytes of one upload (stable across restarts: the row finds its file again). */
  uploadFile(cacheId: string, uploadKey: string): string;
  /** A fresh name for a temporary file (ingest output, a single-shot upload's NAR part). */
  tempFile(suffix: string): string;
  /** Where the compressed frames of one staged upload go; `createdAt` tells a new upload from an abandoned one under the same key. */
  framesDir(cacheId: string, uploadKey: string, createdAt: Date): string;
}

export function stagingArea(baseDir: string): StagingArea {
  const root = join(baseDir, 'staging');
  return {
    root,
    // Hashed so that upload keys ("nar/<name>.nar.xz") never become paths with slashes.
    uploadFile: (cacheId, uploadKey) =>
      join(root, 'uploads', `${cacheId}-${createHash('sha256').update(uploadKey).digest('hex').slice(0, 32)}.part`),
    tempFile: (suffix) => join(root, 'tmp', `${Date.now().toString(36)}-${randomBytes(8).toString('hex')}${suffix}`),
    framesDir: (cacheId, uploadKey, createdAt) =>
      join(root, 'frames', `${cacheId}-${createHash('sha256').update(uploadKey).digest('hex').slice(0, 32)}-${createdAt.getTime().toString(36)}`),
  };
}
