// The evaluator's statistics of one evaluation (worker.eval.metrics): each `nix eval` run gets
// NIX_SHOW_STATS=1 and its own NIX_SHOW_STATS_PATH, so Nix writes its statistics there as JSON when
// the run ends (rather than on stderr, where the error messages are read); the collector sums them.
// A run that left no file or an unreadable one (killed, cancelled, an older Nix) is not counted.
// NIX_COUNT_CALLS=1 adds the call counts the hotspots come from (evalHotspots.ts); the flake graph
// (flakeGraph.ts) is the evaluated flake's lock, as the lock check read it.
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import type { EvalStats, FlakeGraph } from '../protocol/index.js';
import { HotspotCounter } from './evalHotspots.js';

/** A statistics file larger than this is not read (its run's numbers are left out). */
const MAX_STATS_FILE_BYTES = 32 * 1024 * 1024;

/** What kiln reads of Nix's statistics; Nix writes much more (sizes, symbols, sets). */
const NixStats = z.object({
  cpuTime: z.number().min(0).optional(),
  values: z.object({ number: z.number().min(0) }).partial().optional(),
  nrThunks: z.number().min(0).optional(),
  nrFunctionCalls: z.number().min(0).optional(),
  nrPrimOpCalls: z.number().min(0).optional(),
  nrLookups: z.number().min(0).optional(),
  gc: z.object({ heapSize: z.number().min(0), totalBytes: z.number().min(0) }).partial().optional(),
});

const whole = (n: number | undefined): number => Math.min(Number.MAX_SAFE_INTEGER, Math.round(n ?? 0));

export class EvalStatsCollector {
  private readonly totals: EvalStats = {
    runs: 0, cpuSeconds: 0, thunks: 0, functionCalls: 0, primOpCalls: 0, values: 0, lookups: 0, allocatedBytes: 0, peakHeapBytes: 0,
  };
  private next = 0;
  /** the call counts, and what their file names are shown relative to */
  readonly hotspots = new HotspotCounter();
  private flakeGraph: FlakeGraph | null = null;

  private constructor(private readonly dir: string) {}

  static async open(): Promise<EvalStatsCollector> {
    return new EvalStatsCollector(await mkdtemp(join(tmpdir(), 'kiln-eval-stats-')));
  }

  /** Runs `run` with the environment that makes Nix write its statistics, then adds them. */
  async around<T>(env: NodeJS.ProcessEnv, run: (env: NodeJS.ProcessEnv) => Promise<T>): Promise<T> {
    const path = join(this.dir, `run-${this.next++}.json`);
    try {
      return await run({ ...env, NIX_SHOW_STATS: '1', NIX_COUNT_CALLS: '1', NIX_SHOW_STATS_PATH: path });
    } finally {
      await this.add(path);
    }
  }

  private async add(path: string): Promise<void> {
    let json: unknown;
    try {
      // NIX_COUNT_CALLS lists every function called: a nixpkgs-sized run's file could outgrow what is
      // worth parsing in the worker; past the cap that run's statistics are left out
      if ((await stat(path)).size > MAX_STATS_FILE_BYTES) return;
      json = JSON.parse(await readFile(path, 'utf8'));
    } catch {
      return;
    }
    const parsed = NixStats.safeParse(json);
    if (!parsed.success) return;
    this.hotspots.add(json);
    const s = parsed.data;
    const t = this.totals;
    t.runs += 1;
    t.cpuSeconds += s.cpuTime ?? 0;
    t.thunks = whole(t.thunks + (s.nrThunks ?? 0));
    t.functionCalls = whole(t.functionCalls + (s.nrFunctionCalls ?? 0));
    t.primOpCalls = whole(t.primOpCalls + (s.nrPrimOpCalls ?? 0));
    t.values = whole(t.values + (s.values?.number ?? 0));
    t.lookups = whole(t.lookups + (s.nrLookups ?? 0));
    t.allocatedBytes = whole(t.allocatedBytes + (s.gc?.totalBytes ?? 0));
    t.peakHeapBytes = Math.max(t.peakHeapBytes, whole(s.gc?.heapSize));
    await rm(path, { force: true });
  }

  /** The evaluated flake: its source's store path (hotspot files are shown relative to it) and its graph. */
  describeFlake(sourcePath: string | null, graph: FlakeGraph): void {
    if (sourcePath !== null) this.hotspots.setFlakeSource(sourcePath);
    this.flakeGraph = graph;
  }

  /** The sums so far; null when no run left statistics. */
  stats(): EvalStats | null {
    if (this.totals.runs === 0) return null;
    const hotspots = this.hotspots.top();
    return {
      ...this.totals, cpuSeconds: Math.round(this.totals.cpuSeconds * 1e6) / 1e6,
      ...(hotspots ? { hotspots } : {}), ...(this.flakeGraph ? { flakeGraph: this.flakeGraph } : {}),
    };
  }

  async close(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}
