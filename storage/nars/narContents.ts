// Reading inside a stored NAR for the `serve` route: one file's bytes, or a directory packed as
// tar.zst. The stored file is zstd, which cannot be seeked, so both decompress from the start and
// stop as soon as they have what they need.
import { createZstdCompress, constants } from 'node:zlib';
import { decompressNar, readNar } from '../../protocol/index.js';
import type { BlobStore } from '../blobs/index.js';
import { narBlobKey } from './narLocations.js';
import { tarDirectory, tarEnd, tarFileHeader, tarFilePadding, tarSymlink } from './tarArchive.js';

async function* decompressedNar(blobs: BlobStore, fileHash: string): AsyncGenerator<Uint8Array> {
  const read = await blobs.get(narBlobKey(fileHash));
  if (read === null) throw new Error(`the NAR file ${fileHash} is missing from storage`);
  try {
    yield* decompressNar(read.body, 'zstd');
  } finally {
    read.cancel();
  }
}

/** `size` bytes of the NAR from `narOffset` (a regular file's contents, from its listing entry). */
export async function* narSlice(blobs: BlobStore, fileHash: string, narOffset: number, size: number): AsyncGenerator<Uint8Array> {
  let position = 0;
  const end = narOffset + size;
  if (size === 0) return;
  for await (const chunk of decompressedNar(blobs, fileHash)) {
    const from = Math.max(narOffset - position, 0);
    const to = Math.min(end - position, chunk.length);
    if (from < to) yield chunk.subarray(from, to);
    position += chunk.length;
    if (position >= end) return;
  }
  throw new Error(`the NAR file ${fileHash} ends before byte ${end}`);
}

/**
 * The directory `prefix` ("" for the root) of the NAR as a tar.zst in memory, names relative to
 * it. Refuses (returns null) once the uncompressed archive would pass `maxBytes`.
 */
export async function packDirectory(blobs: BlobStore, fileHash: string, prefix: string, maxBytes: number): Promise<Buffer | null> {
  const zstd = createZstdCompress({ params: { [constants.ZSTD_c_compressionLevel]: 3 } });
  const output: Buffer[] = [];
  zstd.on('data', (chunk: Buffer) => output.push(chunk));
  const done = new Promise<void>((resolve, reject) => {
    zstd.on('end', resolve);
    zstd.on('error', reject);
  });
  let total = 0;
  const write = (pieces: Buffer[] | Uint8Array): boolean => {
    for (const piece of Array.isArray(pieces) ? pieces : [pieces]) {
      total += piece.length;
      if (total > maxBytes) return false;
      zstd.write(piece);
    }
    return true;
  };
  const inside = (path: string) => (prefix === '' ? path : path === prefix ? '' : path.startsWith(`${prefix}/`) ? path.slice(prefix.length + 1) : null);
  try {
    for await (const entry of readNar(decompressedNar(blobs, fileHash))) {
      const name = inside(entry.path);
      if (name === null) continue;
      const tarName = name === '' ? '.' : `./${name}`;
      if (entry.type === 'directory') {
        if (!write(tarDirectory(tarName))) return null;
      } else if (entry.type === 'symlink') {
        if (!write(tarSymlink(tarName, entry.target))) return null;
      } else {
        if (!write(tarFileHeader(tarName, entry.size, entry.executable))) return null;
        for await (const chunk of entry.contents) if (!write(chunk)) return null;
        if (!write([tarFilePadding(entry.size)])) return null;
      }
    }
    write([tarEnd()]);
    zstd.end();
    await done;
    return Buffer.concat(output);
  } finally {
    if (!zstd.writableEnded) zstd.destroy();
  }
}
