// Where a page's renderer main thread spent a window of a Chromium trace: each trace event's self
// time (its duration less its children's) summed by name, the tasks' wall and CPU time, and the time
// the thread was idle (waiting on the network or on other processes). For benches that ask why a
// paint came when it did.

export interface TraceEvent { name: string; ph: string; ts: number; pid: number; tid: number; dur?: number; tdur?: number }

export interface MainThreadTime {
  /** wall time inside tasks */
  busyMs: number;
  /** the thread's CPU time inside tasks (less than busy when the machine's load takes its core away) */
  cpuMs: number;
  /** the window less busy */
  idleMs: number;
  /** self time by event name, largest first */
  byName: Record<string, number>;
}

const round = (us: number) => Math.round(us / 100) / 10;

/** The main thread (`pid`, `tid`) from `from` to `to` (trace microseconds). */
export function mainThreadTime(events: readonly TraceEvent[], pid: number, tid: number, from: number, to: number): MainThreadTime {
  const spans = events
    .filter((e) => e.ph === 'X' && e.pid === pid && e.tid === tid && e.dur !== undefined && e.ts >= from && e.ts < to)
    .sort((a, b) => a.ts - b.ts || b.dur! - a.dur!);
  const self = new Map<string, number>();
  // Open spans, outermost first; a span's children are subtracted from its self time as they are seen.
  const stack: { end: number; name: string }[] = [];
  let [busy, cpu] = [0, 0];
  for (const e of spans) {
    while (stack.length > 0 && stack.at(-1)!.end <= e.ts) stack.pop();
    const parent = stack.at(-1);
    const dur = Math.min(e.dur!, to - e.ts);
    if (parent) self.set(parent.name, (self.get(parent.name) ?? 0) - dur);
    else { busy += dur; cpu += Math.min(e.tdur ?? 0, dur); }
    self.set(e.name, (self.get(e.name) ?? 0) + dur);
    stack.push({ end: e.ts + dur, name: e.name });
  }
  const byName = Object.fromEntries([...self].filter(([, us]) => us >= 1000).sort((a, b) => b[1] - a[1]).map(([name, us]) => [name, round(us)]));
  return { busyMs: round(busy), cpuMs: round(cpu), idleMs: round(to - from - busy), byName };
}
