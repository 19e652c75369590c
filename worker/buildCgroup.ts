// A build's own cgroup (worker.build.metrics, worker.build.cgroup, cgroup v2): the worker makes
// `kiln-build-<job>` under the configured directory and starts the build's nix-store inside it (a
// shell writes its own pid to cgroup.procs, then execs, so nothing the build starts escapes the
// cgroup). Every process started by that Nix is counted: with a local store (a root worker,
// NIX_REMOTE=local) that is the builder itself; with a daemon it is only the client (the build
// runs under the daemon). When the build ends the worker reads CPU time (cpu.stat, always there in
// cgroup v2), peak memory (memory.peak), disk I/O (io.stat) and OOM kills (memory.events) when
// those controllers are enabled, then removes the cgroup. While it runs, the heartbeats carry the
// same counters so far (buildReadings.ts).
import { mkdir, readFile, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { BuildResources } from '../protocol/index.js';

export interface BuildCgroup {
  /** the command and arguments that run `command args` inside the cgroup */
  wrap(command: string, args: readonly string[]): [string, string[]];
  /** what the cgroup counted; call once its processes ended */
  read(): Promise<BuildResources>;
  /** what it counted so far, and the memory its processes use now (memory.current; null without the memory controller) */
  readNow(): Promise<BuildResources & { memoryBytes: number | null }>;
  remove(): Promise<void>;
}

/** Reads a flat-keyed cgroup file ("key value" lines) into numbers; null when it does not exist. */
async function keyedFile(path: string): Promise<Map<string, number> | null> {
  const text = await readFile(path, 'utf8').catch(() => null);
  if (text === null) return null;
  const values = new Map<string, number>();
  for (const line of text.split('\n')) {
    const [key, value] = line.trim().split(/\s+/);
    if (key && value !== undefined && /^\d+$/.test(value)) values.set(key, Number(value));
  }
  return values;
}

/** io.stat: one line per device, "MAJ:MIN rbytes=… wbytes=… rios=…": bytes summed over devices. */
async function ioBytes(path: string): Promise<{ read: number; write: number } | null> {
  const text = await readFile(path, 'utf8').catch(() => null);
  if (text === null) return null;
  let read = 0;
  let write = 0;
  for (const match of text.matchAll(/\b(rbytes|wbytes)=(\d+)/g)) {
    if (match[1] === 'rbytes') read += Number(match[2]);
    else write += Number(match[2]);
  }
  return { read, write };
}

/** A cgroup name per job: job ids may hold characters a file name should not. */
const cgroupName = (jobId: string) => `kiln-build-${jobId.replace(/[^A-Za-z0-9._-]/g, '_')}`;

/**
 * Makes the build's cgroup under `parent`; throws when it cannot (no cgroup v2 there, no permission),
 * and the caller builds without one.
 */
export async function openBuildCgroup(parent: string, jobId: string): Promise<BuildCgroup> {
  const dir = join(parent, cgroupName(jobId));
  await mkdir(dir);
  // cgroup.procs exists in every cgroup v2 directory: a plain directory here is not a cgroup.
  if ((await readFile(join(dir, 'cgroup.procs'), 'utf8').catch(() => null)) === null) {
    await rmdir(dir).catch(() => undefined);
    throw new Error(`${parent} is not a cgroup v2 directory`);
  }
  const read = async (): Promise<BuildResources> => {
    const cpu = await keyedFile(join(dir, 'cpu.stat'));
    const events = await keyedFile(join(dir, 'memory.events'));
    const peak = await readFile(join(dir, 'memory.peak'), 'utf8').catch(() => null);
    const io = await ioBytes(join(dir, 'io.stat'));
    return {
      cpuUserSeconds: (cpu?.get('user_usec') ?? 0) / 1e6,
      cpuSystemSeconds: (cpu?.get('system_usec') ?? 0) / 1e6,
      peakMemoryBytes: peak !== null && /^\d+\s*$/.test(peak) ? Number(peak.trim()) : null,
      ioReadBytes: io?.read ?? null,
      ioWriteBytes: io?.write ?? null,
      oomKills: events?.get('oom_kill') ?? null,
    };
  };
  return {
    // "$0" is the cgroup directory and "$@" the command: no value is ever parsed by the shell.
    wrap: (command, args) => ['/bin/sh', ['-c', 'echo $$ > "$0/cgroup.procs" && exec "$@"', dir, command, ...args]],
    read,
    async readNow() {
      const current = await readFile(join(dir, 'memory.current'), 'utf8').catch(() => null);
      return { ...(await read()), memoryBytes: current !== null && /^\d+\s*$/.test(current) ? Number(current.trim()) : null };
    },
    // A cgroup with a process left in it cannot be removed: it stays, and is named in the error.
    remove: () => rmdir(dir),
  };
}
