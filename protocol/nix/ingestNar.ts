// The ingest pipeline, one pass over an uploaded NAR: NarHash and NarSize, the .ls listing,
// zstd compression, and FileHash/FileSize of the compressed bytes, which go to a sink the
// caller gives (the storage layer writes them to a file or an S3 upload). Pure apart from
// node:crypto and node:zlib, so it runs inside a piscina worker.
import type { ByteSource } from './byteSource.js';
import { createHash } from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import { constants, createZstdCompress } from 'node:zlib';
import { sha256Nix32, type NarDigest } from './narDigest.js';
import { NarListingBuilder, type NarListing } from './narListing.js';
import type { NarLimits } from './narLimits.js';
import { NarParser } from './narParser.js';

export interface IngestOptions {
  /** `zstd` (the default, what kiln stores) or `none`. */
  compression?: 'zstd' | 'none';
  /** zstd level; 3 is zstd's default and what Nix uses. */
  zstdLevel?: number;
  limits?: Partial<NarLimits>;
  /** Size of the compressed chunks handed to the sink. */
  chunkBytes?: number;
}

export interface IngestResult extends NarDigest {
  compression: 'zstd' | 'none';
  /** `sha256:<nix32>` of the bytes the sink received. */
  fileHash: string;
  fileSize: number;
  listing: NarListing;
}

/**
 * Reads `source` once and resolves when the sink has taken the last compressed byte. Chunks of
 * `source` must not be reused by their producer after they are yielded (fs and network streams
 * do not). On rejection (a NarError for a malformed NAR, or the sink's own error) whatever the
 * sink received is not a valid file: the caller discards it.
 */
export async function ingestNar(
  source: ByteSource,
  sink: (chunk: Uint8Array) => Promise<void>,
  options: IngestOptions = {},
): Promise<IngestResult> {
  const compression = options.compression ?? 'zstd';
  const narHash = createHash('sha256');
  const listing = new NarListingBuilder();
  const parser = new NarParser(listing, options.limits);
  const parsed = async function* (): AsyncGenerator<Uint8Array> {
    for await (const chunk of source) {
      parser.push(chunk);
      narHash.update(chunk);
      yield chunk;
    }
    parser.end();
  };

  let fileHash: string;
  let fileSize = 0;
  if (compression === 'none') {
    for await (const chunk of parsed()) await sink(chunk);
    fileHash = sha256Nix32(narHash.copy().digest());
    fileSize = parser.position;
  } else {
    const compressed = createHash('sha256');
    const zstd = createZstdCompress({
      params: { [constants.ZSTD_c_compressionLevel]: options.zstdLevel ?? 3 },
      chunkSize: options.chunkBytes ?? 128 * 1024,
    });
    await pipeline(parsed, zstd, async (output: AsyncIterable<Uint8Array>) => {
      for await (const chunk of output) {
        compressed.update(chunk);
        fileSize += chunk.length;
        await sink(chunk);
      }
    });
    fileHash = sha256Nix32(compressed.digest());
  }
  const nar = sha256Nix32(narHash.digest());
  return { narHash: nar, narSize: parser.position, compression, fileHash, fileSize, listing: listing.listing };
}
