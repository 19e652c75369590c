// xz decompression with xz-decompress (xz-embedded compiled to WebAssembly, no native code):
// Nix wrote xz NARs by default before zstd.
import type { ByteSource } from './byteSource.js';
import { createRequire } from 'node:module';

// The package is CommonJS with a named export that Node's ESM loader cannot see statically.
const { XzReadableStream } = createRequire(import.meta.url)('xz-decompress') as {
  XzReadableStream: new (input: ReadableStream<Uint8Array>) => ReadableStream<Uint8Array>;
};

export async function* decompressXz(source: ByteSource): AsyncGenerator<Uint8Array> {
  let sourceError: unknown;
  const tracked = (async function* () {
    try {
      yield* source;
    } catch (e) {
      sourceError = e;
      throw e;
    }
  })();
  const output = new XzReadableStream(ReadableStream.from(tracked) as ReadableStream<Uint8Array>);
  const reader = output.getReader();
  try {
    for (;;) {
      let next: Awaited<ReturnType<typeof reader.read>>;
      try {
        next = await reader.read();
      } catch (e) {
        if (e === sourceError) throw e;
        throw new Error(`xz data is corrupt: ${(e as Error).message}`, { cause: e });
      }
      if (next.done) return;
      yield next.value;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}
