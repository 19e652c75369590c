// What the NAR readers take: a stream of byte chunks, a Node Readable, a web stream's async
// iterator, a generator, or a plain array of buffers in tests.
export type ByteSource = AsyncIterable<Uint8Array> | Iterable<Uint8Array>;

export function byteIterator(source: ByteSource): AsyncIterator<Uint8Array> | Iterator<Uint8Array> {
  return Symbol.asyncIterator in source ? source[Symbol.asyncIterator]() : source[Symbol.iterator]();
}
