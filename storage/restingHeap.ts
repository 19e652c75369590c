// Gives back the young generation a start-up grew (docs/http.md, "Memory at rest: the start-up's
// young generation"). Loading ~1,000 modules is an allocation burst: V8 grows the isolate's young
// generation to its largest (two 16 MiB semi-spaces), and an ordinary full collection keeps it at
// that size, every page of it resident although almost nothing lives there at rest. A collection
// that reduces the footprint (V8's "last resort": what a low-memory notification runs) shrinks it
// back to 1 MiB. V8 grows it again under an allocation burst, as before, so the scheduler's work
// is not held to a small young generation (`--max-semi-space-size`, which doubled its CPU per
// build, was dropped for that).
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { PerformanceObserver } from 'node:perf_hooks';

interface GcOptions {
  type: 'major';
  execution: 'sync';
  flavor: 'last-resort';
}

let collect: ((options: GcOptions) => void) | null = null;

/**
 * One footprint-reducing full collection of this thread's isolate, now (tens of ms; run it at rest).
 * False when the collector could not be had this time (the next call tries again): it never throws,
 * as a serving thread calls it right after it listens, and a throw there ended the thread.
 */
export function shrinkHeapAtRest(): boolean {
  collect ??= gcFunction();
  if (collect === null) return false;
  collect({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  return true;
}

/**
 * The gc extension is installed in contexts made while --expose-gc is set; the process's own global
 * stays without `gc` unless Node was started with it. The flag is the process's, not the isolate's,
 * so it is set again right before each try: another thread (the serving threads start together)
 * may turn it off between one thread's setting it and its making the context.
 */
function gcFunction(): ((options: GcOptions) => void) | null {
  for (let attempt = 0; attempt < 8; attempt++) {
    setFlagsFromString('--expose-gc');
    try {
      const found = runInNewContext('typeof gc === "function" ? gc : null') as ((options: GcOptions) => void) | null;
      if (found !== null) return found;
    } finally {
      // off again, so no isolate or context made later gets a `gc` (review r5d-8)
      setFlagsFromString('--no-expose-gc');
    }
  }
  return null;
}

/**
 * Above this the young generation has grown under a burst (V8's smallest is 1 MiB: two 0.5 MiB
 * semi-spaces; it doubles, so a shrink is due at 16 MiB and more). Under steady light work V8 keeps
 * it at 4-8 MiB (the main thread under 1,000 idle workers' beats), and a shrink there spent the
 * once-per-minGapMs shrink on a few MiB V8 took back within seconds: the main thread shrunk at
 * 4 MiB just before 1,000 workers connected kept the 32 MiB they grew, ~30 MiB of RSS in half the
 * bench's rounds (h53).
 */
const GROWN_BYTES = 8 * 1024 * 1024;

export interface HeapAtRestOptions {
  /** how often the young generation is looked at (default 2 s) */
  intervalMs?: number;
  /**
   * less than this share of the young generation's size allocated in one interval is rest (default
   * an eighth: 4 MiB in 2 s when it has grown to 32 MiB, what 1,000 idle workers' beats stay under)
   */
  restShare?: number;
  /** the least time between two shrinks (default 5 min): each is a synchronous full collection, a pause for everything the thread serves */
  minGapMs?: number;
  /** called after each shrink */
  shrunk?: () => void;
  /** the clock the gap is measured on (tests) */
  now?: () => number;
}

/**
 * Shrinks the young generation again whenever it has grown and the isolate comes to rest: one
 * interval in which less than `restShare` of its size was allocated in it (its use grew by less,
 * and no collection ran). A burst (the start-up, 1,000 workers connecting, a dispatch run) grows it
 * to 32 MiB, and V8 keeps that size at rest. The look is one heap statistics call; the shrink
 * runs once per burst, when it is over. Returns the stop.
 */
export function watchHeapAtRest({ intervalMs = 2000, restShare = 1 / 8, minGapMs = 5 * 60_000, shrunk, now = () => performance.now() }: HeapAtRestOptions = {}): () => void {
  // a collection in the interval (a scavenge empties the young generation) means more was allocated than its growth shows
  let collections = 0;
  const observer = new PerformanceObserver((list) => {
    collections += list.getEntries().length;
  });
  observer.observe({ entryTypes: ['gc'] });
  let usedBefore = youngGeneration().used;
  // What the last shrink left: V8 never shrinks below the young generation's initial size (an
  // operator's --min-semi-space-size), so a shrink is due only when it grew past that again; and
  // not twice within minGapMs (review r5d-3/4: it repeated every 2 s at idle, and ran during light traffic).
  let floor = 0;
  let lastShrink = -Infinity;
  const timer = setInterval(() => {
    const { size, used } = youngGeneration();
    const atRest = collections === 0 && used - usedBefore < size * restShare;
    if (size > Math.max(GROWN_BYTES, floor + GROWN_BYTES) && atRest && now() - lastShrink >= minGapMs) {
      // without a collector this time, the next look tries again
      if (shrinkHeapAtRest()) {
        lastShrink = now();
        floor = youngGeneration().size;
        shrunk?.();
      }
    }
    collections = 0;
    usedBefore = youngGeneration().used;
  }, intervalMs);
  timer.unref();
  return () => {
    clearInterval(timer);
    observer.disconnect();
  };
}

function youngGeneration(): { size: number; used: number } {
  const space = getHeapSpaceStatistics().find((s) => s.space_name === 'new_space');
  return { size: space?.space_size ?? 0, used: space?.space_used_size ?? 0 };
}
