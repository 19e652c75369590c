// Reading inside a stored NAR for the `serve` route: one file's bytes, or a directory streamed as
// tar.zst. The stored file is zstd, which cannot be seeked, so both decompress from the start and
// stop as soon as they have what they need.
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
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

/** How far a directory archive has got: tar bytes packed so far (tests watch backpressure with it). */
export interface ArchiveProgress {
  packed(bytes: number): void;
}

/** The tar entries of the directory `prefix` ("" for the root), names relative to it, read as needed. */
async function* tarPieces(blobs: BlobStore, fileHash: string, prefix: string, progress?: ArchiveProgress): AsyncGenerator<Uint8Array> {
  const inside = (path: string) => (prefix === '' ? path : path === prefix ? '' : path.startsWith(`${prefix}/`) ? path.slice(prefix.length + 1) : null);
  function* counted(pieces: Uint8Array[]): Generator<Uint8Array> {
    for (const piece of pieces) {
      progress?.packed(piece.length);
      yield piece;
    }
  }
  for await (const entry of readNar(decompressedNar(blobs, fileHash))) {
    const name = inside(entry.path);
    if (name === null) continue;
    const tarName = name === '' ? '.' : `./${name}`;
    if (entry.type === 'directory') yield* counted(tarDirectory(tarName));
    else if (entry.type === 'symlink') yield* counted(tarSymlink(tarName, entry.target));
    else {
      yield* counted(tarFileHeader(tarName, entry.size, entry.executable));
      for await (const chunk of entry.contents) yield* counted([chunk]);
      yield* counted([tarFilePadding(entry.size)]);
    }
  }
  yield* counted([tarEnd()]);
}

/**
 * The directory `prefix` of the NAR as a tar.zst, produced as it is read: the NAR is decompressed,
 * packed and compressed only as fast as the consumer takes chunks, so memory stays at a few stream
 * buffers whatever the directory holds. Stopping early (return/throw) stops the reading.
 */
export async function* directoryArchive(blobs: BlobStore, fileHash: string, prefix: string, progress?: ArchiveProgress): AsyncGenerator<Uint8Array> {
  const zstd = createZstdCompress({ params: { [constants.ZSTD_c_compressionLevel]: 3 } });
  const source = Readable.from(tarPieces(blobs, fileHash, prefix, progress), { objectMode: false, highWaterMark: 64 * 1024 });
  // pipeline moves the tar into zstd with backpressure and destroys both on failure; the failure
  // then surfaces through the iteration below, so the promise's own rejection is only observed.
  const piped = pipeline(source, zstd);
  piped.catch(() => undefined);
  try {
    for await (const chunk of zstd) yield chunk as Buffer;
    await piped;
  } finally {
    source.destroy();
    zstd.destroy();
  }
}
