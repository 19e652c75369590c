// Servers under test in processes of their own (bench/kilnProcess.ts, bench/bareProtoServer.ts),
// and what they cost as the kernel counts it: resident memory and CPU time of every thread.
import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { SERVE_ENV, SERVE_V8_FLAGS } from '../bin/serveFlags.js';
import type { KilnProcessOptions, KilnProcessReady } from './kilnProcess.js';

export interface ChildServer<T> {
  pid: number;
  ready: T;
  /** a full garbage collection in the child; resolves with the child's V8 heap in use after it */
  gc(): Promise<number>;
  /** sends `message` and resolves with the child's next message */
  request(message: string): Promise<unknown>;
  stop(): Promise<void>;
}

/** `env`, `nodeFlags`: more variables and Node options for the child (a kiln server's are those `kiln serve` runs with: forkKiln). */
export async function forkServer<T>(script: string, args: string[], env: Record<string, string> = {}, nodeFlags: readonly string[] = []): Promise<ChildServer<T>> {
  const path = fileURLToPath(new URL(script, import.meta.url));
  // BENCH_CPU_PROF=dir: the server writes a V8 CPU profile there when it exits (where a pass spends its time)
  const profile = process.env['BENCH_CPU_PROF'] ? ['--cpu-prof', `--cpu-prof-dir=${process.env['BENCH_CPU_PROF']}`] : [];
  // BENCH_NODE_FLAGS="--a --b": more Node or V8 options for the server (an A/B of a V8 option, e.g. --no-parallel-scavenge)
  const flags = (process.env['BENCH_NODE_FLAGS'] ?? '').split(' ').filter((flag) => flag !== '');
  const child: ChildProcess = fork(path, args, { execArgv: ['--import', 'tsx', ...profile, ...nodeFlags, ...flags], env: { ...process.env, ...env }, stdio: 'inherit' });
  const ready = await new Promise<T>((resolve, reject) => {
    child.once('message', (message) => resolve(message as T));
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code} before it was ready`)));
  });
  const request = (message: string) => new Promise<unknown>((resolve) => {
    child.once('message', resolve);
    child.send(message);
  });
  return {
    pid: child.pid!,
    ready,
    gc: async () => (await request('gc')) as number,
    request,
    stop: () => new Promise<void>((resolve) => {
      if (child.exitCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.send('stop');
    }),
  };
}

/**
 * kiln in a process of its own (bench/kilnProcess.ts) with the environment and V8 options `kiln
 * serve` runs with (bin/serveFlags.js); BENCH_NODE_DEFAULTS=1: without them.
 */
export const forkKiln = (options: KilnProcessOptions): Promise<ChildServer<KilnProcessReady>> => {
  const defaults = process.env['BENCH_NODE_DEFAULTS'] === '1';
  return forkServer<KilnProcessReady>('./kilnProcess.ts', [JSON.stringify(options)], defaults ? {} : SERVE_ENV, defaults ? [] : SERVE_V8_FLAGS);
};

export interface ProcessUsage {
  rssBytes: number;
  /** the part of rssBytes that is anonymous memory (heaps, malloc), not pages mapped from files */
  rssAnonBytes: number;
  /** user + system CPU time, all threads */
  cpuMs: number;
}

const CLOCK_TICKS_PER_SEC = 100;

export function processUsage(pid: number): ProcessUsage {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const rssKiB = Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1]);
  const anonKiB = Number(/RssAnon:\s+(\d+) kB/.exec(status)?.[1]);
  // Fields after the command name (which may hold spaces, hence the last parenthesis).
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return { rssBytes: rssKiB * 1024, rssAnonBytes: anonKiB * 1024, cpuMs: (ticks * 1000) / CLOCK_TICKS_PER_SEC };
}

/** Load average of the machine, for the README. */
export const loadAverage = (): string => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

/** A full collection, in the child (--expose-gc on the command line would reach worker threads, which refuse it). */
export function fullGc(): number {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
  return process.memoryUsage().heapUsed;
}
