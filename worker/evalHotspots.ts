// The hotspots of an evaluation (worker.eval.metrics): with NIX_COUNT_CALLS=1, Nix 2.8's statistics
// JSON counts the calls of every function (`functions`: name, file, line, column, count) and of
// every primop (`primops`: name → count). The counter sums them over the evaluation's runs and
// keeps the most called. An entry it cannot read is skipped: hotspots never fail an evaluation.
// File names are the evaluator's: a store path (the flake's source or an input's), the text of an
// expression given inline, or in principle a worker file. What is under one of the worker's own
// directories becomes relative to it; the flake's source becomes relative to the flake; any other
// path outside the store, and inline text, is withheld (null).
import { z } from 'zod';
import type { EvalHotspots } from '../protocol/index.js';

export const TOP_FUNCTIONS = 20;
export const TOP_PRIMOPS = 10;
/** How many distinct functions and primops are kept between runs: the rest of a run's long tail is dropped. */
const KEPT_ENTRIES = 2000;
const STORE_DIR = '/nix/store/';

const CountedFunction = z.object({
  name: z.string().nullish(),
  file: z.string().nullish(),
  line: z.number().int().min(0).optional(),
  count: z.number().min(0),
});
const Count = z.number().min(0);

interface FunctionTotal { name: string | null; file: string | null; line: number; count: number }

const whole = (n: number): number => Math.min(Number.MAX_SAFE_INTEGER, Math.round(n));

/** The `keep` largest counts of `totals`, largest first (ties by key, so the order is stable). */
function largest<T extends { count: number }>(totals: Map<string, T>, keep: number): [string, T][] {
  return [...totals].sort(([ka, a], [kb, b]) => b.count - a.count || (ka < kb ? -1 : ka > kb ? 1 : 0)).slice(0, keep);
}

export class HotspotCounter {
  private readonly functions = new Map<string, FunctionTotal>();
  private readonly primOps = new Map<string, { count: number }>();
  private readonly privateDirs: string[] = [];
  private flakeSource: string | null = null;

  /** Worker directories (the clone, the base directory) whose paths are shown relative to them. */
  hidePrefix(dir: string): void {
    this.privateDirs.push(dir.endsWith('/') ? dir : `${dir}/`);
  }

  /** The store path of the evaluated flake's source: its files are shown relative to the flake. */
  setFlakeSource(storePath: string): void {
    this.flakeSource = storePath.endsWith('/') ? storePath : `${storePath}/`;
  }

  private shownFile(file: string | null | undefined): string | null {
    if (!file?.startsWith('/')) return null;
    for (const dir of [...(this.flakeSource === null ? [] : [this.flakeSource]), ...this.privateDirs]) {
      if (file.startsWith(dir)) return file.slice(dir.length).slice(0, 1024);
    }
    return file.startsWith(STORE_DIR) ? file.slice(0, 1024) : null;
  }

  /** Adds one run's statistics (the parsed JSON, whatever its shape). */
  add(stats: unknown): void {
    if (typeof stats !== 'object' || stats === null) return;
    const { functions, primops } = stats as { functions?: unknown; primops?: unknown };
    if (Array.isArray(functions)) {
      for (const entry of functions) {
        const f = CountedFunction.safeParse(entry);
        if (!f.success) continue;
        const name = f.data.name?.slice(0, 256) ?? null;
        const file = this.shownFile(f.data.file);
        const line = f.data.line ?? 0;
        // Keyed by what is shown: lambdas on one line of one file, or of withheld files, are one entry.
        const key = JSON.stringify([file, line, name]);
        const total = this.functions.get(key) ?? { name, file, line, count: 0 };
        total.count = whole(total.count + f.data.count);
        this.functions.set(key, total);
      }
    }
    if (typeof primops === 'object' && primops !== null && !Array.isArray(primops)) {
      for (const [name, value] of Object.entries(primops)) {
        const count = Count.safeParse(value);
        if (!count.success || name.length > 256) continue;
        const total = this.primOps.get(name) ?? { count: 0 };
        total.count = whole(total.count + count.data);
        this.primOps.set(name, total);
      }
    }
    prune(this.functions);
    prune(this.primOps);
  }

  /** The most called functions and primops so far; undefined when no run counted any. */
  top(): EvalHotspots | undefined {
    if (this.functions.size === 0 && this.primOps.size === 0) return undefined;
    return {
      functions: largest(this.functions, TOP_FUNCTIONS).map(([, f]) => ({ ...f })),
      primOps: largest(this.primOps, TOP_PRIMOPS).map(([name, p]) => ({ name, count: p.count })),
    };
  }
}

function prune<T extends { count: number }>(totals: Map<string, T>): void {
  if (totals.size <= KEPT_ENTRIES) return;
  const kept = largest(totals, KEPT_ENTRIES);
  totals.clear();
  for (const [key, value] of kept) totals.set(key, value);
}
