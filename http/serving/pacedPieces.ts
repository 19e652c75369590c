// Pieces of a NAR a serving thread sends (threadNars.ts), counted toward the read's minimum pace
// (storage/nars/readPace.ts) as the socket takes them: the next piece is asked for only then.

/** Kept bytes sent in pieces of this size (views, no copy), each counted toward the read's pace as the socket takes it. */
const KEPT_PIECE_BYTES = 256 * 1024;
export async function* slices(bytes: Buffer): AsyncGenerator<Buffer, void, undefined> {
  for (let at = 0; at < bytes.length; at += KEPT_PIECE_BYTES) yield bytes.subarray(at, at + KEPT_PIECE_BYTES);
}

/** The pieces, each counted toward the read's pace as the socket takes it (the next is read only then). */
export async function* paced(pieces: AsyncGenerator<Buffer, void, undefined>, pace: { add(bytes: number): void }): AsyncGenerator<Buffer, void, undefined> {
  for await (const piece of pieces) {
    yield piece;
    pace.add(piece.length);
  }
}
