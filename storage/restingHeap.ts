// Gives back the young generation a start-up grew (docs/http.md, "Memory at rest: the start-up's
// young generation"). Loading ~1,000 modules is an allocation burst: V8 grows the isolate's young
// generation to its largest (two 16 MiB semi-spaces), and an ordinary full collection keeps it at
// that size, every page of it resident although almost nothing lives there at rest. A collection
// that reduces the footprint (V8's "last resort": what a low-memory notification runs) shrinks it
// back to 1 MiB. V8 grows it again under an allocation burst, as before, so the scheduler's work
// is not held to a small young generation (`--max-semi-space-size`, which doubled its CPU per
// build, was dropped for that).
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

interface GcOptions {
  type: 'major';
  execution: 'sync';
  flavor: 'last-resort';
}

let collect: ((options: GcOptions) => void) | null = null;

/** One footprint-reducing full collection of this thread's isolate, now (tens of ms; run it at rest). */
export function shrinkHeapAtRest(): void {
  if (collect === null) {
    // The gc extension is installed in contexts made after the flag is set; the process's own
    // global stays without `gc` unless Node was started with --expose-gc.
    setFlagsFromString('--expose-gc');
    collect = runInNewContext('gc') as (options: GcOptions) => void;
  }
  collect({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}
