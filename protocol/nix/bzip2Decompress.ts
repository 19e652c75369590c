// bzip2 decompression with unbzip2-stream (pure JavaScript): Nix's narinfo default when a
// Compression line is missing, and what the oldest caches hold.
import type { ByteSource } from './byteSource.js';
import unbzip2Stream from 'unbzip2-stream';

export async function* decompressBzip2(source: ByteSource): AsyncGenerator<Uint8Array> {
  // A classic through-stream that emits synchronously from write(), so each input chunk's
  // output (at most a few 900 kB blocks) is collected and handed on before the next is read.
  const stream = unbzip2Stream();
  let out: Uint8Array[] = [];
  let failure: Error | undefined;
  stream.on('data', (chunk: Uint8Array) => void out.push(chunk));
  stream.on('error', (e: Error) => void (failure ??= e));
  const drain = function* (): Generator<Uint8Array> {
    if (failure) throw new Error(`bzip2 data is corrupt: ${failure.message}`, { cause: failure });
    const ready = out;
    out = [];
    yield* ready;
  };
  for await (const chunk of source) {
    stream.write(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length));
    yield* drain();
  }
  stream.end();
  yield* drain();
}
