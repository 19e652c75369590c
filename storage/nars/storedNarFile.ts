// A stored NAR file as a local file the CPU pool can read: the blob itself on the filesystem
// store, a temporary download from an object store. Needed when a `nix copy` narinfo names a file
// the cache already serves (its references are then checked against those bytes).
import { createWriteStream } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { FilesystemBlobStore, type BlobStore } from '../blobs/index.js';
import { narBlobKey, type StagingArea } from './narLocations.js';

export interface LocalNarFile {
  path: string;
  /** Removes the temporary download; nothing for a blob read in place. */
  release(): Promise<void>;
}

export async function localNarFile(blobs: BlobStore, staging: StagingArea, fileHash: string): Promise<LocalNarFile | null> {
  const key = narBlobKey(fileHash);
  if (blobs instanceof FilesystemBlobStore) {
    return (await blobs.stat(key)) === null ? null : { path: join(blobs.root, ...key.split('/')), release: async () => undefined };
  }
  const read = await blobs.get(key);
  if (read === null) return null;
  const path = staging.tempFile('.nar.zst');
  await mkdir(dirname(path), { recursive: true });
  try {
    await pipeline(read.body, createWriteStream(path));
  } catch (e) {
    await rm(path, { force: true });
    throw e;
  }
  return { path, release: () => rm(path, { force: true }) };
}
