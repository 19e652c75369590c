// One frame compressed straight into a caller's buffer (a shared frame slot, frameSlots.ts).
// node:zlib has no public call for that: its sync API allocates the output, a fresh 16 MiB per
// frame, which the pool thread then copies into the slot and leaves to the garbage collector.
// Measured on the 520 MiB bench NAR on one thread: 6.9k page faults instead of 26-33k, and
// 1.10-1.14 s instead of 1.24-1.32 s. So this drives the native handle behind node:zlib's
// ZstdCompress the way zstdCompressSync does (writeSync with the finishing flush, then the two
// counts in _writeState), on one engine per thread and level, reused frame after frame. The
// bytes are those of compressFrame (narFrames.ts), which a test checks; these are internals of
// the Node version kiln pins, so where they are missing the public call and a copy stand in.
import zlib, { constants } from 'node:zlib';
import { compressFrame, zstdCompressBound } from './narFrames.js';

interface NativeHandle {
  writeSync(flush: number, input: Uint8Array, inOffset: number, inLength: number, output: Uint8Array, outOffset: number, outLength: number): void;
}
interface EngineInternals {
  _handle?: NativeHandle;
  /** [output bytes left, input bytes left] after each writeSync; left as it was when zstd fails */
  _writeState?: Uint32Array;
  /** true once zstd failed: the native side reports errors by destroying the stream, not by throwing */
  destroyed?: boolean;
  on?(event: 'error', listener: (e: unknown) => void): unknown;
}

/** This thread's engines by level; one that failed is dropped (its frame may be half made). */
const engines = new Map<number, Required<EngineInternals>>();

function engineFor(level: number): Required<EngineInternals> | null {
  let engine = engines.get(level);
  if (engine === undefined) {
    const made = new zlib.ZstdCompress({ params: { [constants.ZSTD_c_compressionLevel]: level } }) as unknown as EngineInternals;
    if (typeof made._handle?.writeSync !== 'function' || !(made._writeState instanceof Uint32Array) || typeof made.on !== 'function') return null;
    // A failure is emitted as 'error' after the call; compressFrameInto throws it by `destroyed`.
    made.on('error', () => undefined);
    engine = made as Required<EngineInternals>;
    engines.set(level, engine);
  }
  return engine;
}

/** Compresses `frame` into the start of `output` (at least zstdCompressBound(frame) bytes); the frame's length. */
export function compressFrameInto(frame: Uint8Array, level: number, output: Uint8Array): number {
  const room = zstdCompressBound(frame.byteLength);
  if (output.byteLength < room) throw new RangeError(`compressFrameInto: the output holds ${output.byteLength} bytes, a frame of ${frame.byteLength} may need ${room}`);
  const engine = engineFor(level);
  if (engine === null) {
    const bytes = compressFrame(frame, level);
    output.set(bytes);
    return bytes.byteLength;
  }
  try {
    engine._writeState.fill(0); // a failed call leaves the counts alone: zeros then read as "unfinished"
    engine._handle.writeSync(constants.ZSTD_e_end, frame, 0, frame.byteLength, output, 0, room);
    if (engine.destroyed === true) throw new Error(`zstd could not compress a frame of ${frame.byteLength} bytes`);
    const [outLeft, inLeft] = engine._writeState;
    // With room for the worst case zstd ends the frame in this one call.
    if (inLeft !== 0 || outLeft === undefined || outLeft === 0 || outLeft > room) {
      throw new Error(`zstd left the frame unfinished (${inLeft ?? '?'} input bytes, ${outLeft ?? '?'} output bytes left)`);
    }
    return room - outLeft;
  } catch (e) {
    engines.delete(level);
    throw e;
  }
}
