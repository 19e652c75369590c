// What the evaluation pool reads of memory: the host's available memory (MemAvailable, what can be
// had without swapping: free plus reclaimable cache) and one process's resident size (VmRSS).
// The pool takes these as a probe so a test can give it a host of any size.
import { readFileSync } from 'node:fs';
import { totalmem } from 'node:os';

export interface MemoryProbe {
  /** bytes the host can still hand out */
  availableBytes(): number;
  /** the resident bytes of `pid`; null when it is gone */
  rssBytes(pid: number): number | null;
}

const KIB = 1024;
const MIB = 1024 * KIB;

/** The `<name>: <n> kB` field of a /proc status-like text, in bytes. */
function kbField(text: string, name: string): number | null {
  const match = new RegExp(`^${name}:\\s+(\\d+) kB$`, 'm').exec(text);
  return match ? Number(match[1]) * KIB : null;
}

export const procMemoryProbe: MemoryProbe = {
  availableBytes: () => kbField(readFileSync('/proc/meminfo', 'utf8'), 'MemAvailable') ?? Number.MAX_SAFE_INTEGER,
  rssBytes(pid) {
    try {
      // A zombie has no VmRSS line: it holds no memory any more.
      return kbField(readFileSync(`/proc/${pid}/status`, 'utf8'), 'VmRSS') ?? 0;
    } catch {
      return null;
    }
  },
};

/** worker.system.minFreeRamMb in bytes: 0 means 10% of total memory, clamped to 128 MiB to 1 GiB. */
export function minFreeRamBytes(configuredMb: number, totalBytes: number = totalmem()): number {
  if (configuredMb > 0) return configuredMb * MIB;
  return Math.min(1024 * MIB, Math.max(128 * MIB, Math.floor(totalBytes / 10)));
}

/**
 * A host with `availableBytes` to spare before the pool's subprocesses, which are all that changes
 * it: their real resident sizes, as last read, are taken from it. For the bench and the tests,
 * where the real host is shared with work whose memory comes and goes.
 */
export function poolOnlyHost(availableBytes: number): MemoryProbe {
  const held = new Map<number, number>();
  return {
    rssBytes(pid) {
      const rss = procMemoryProbe.rssBytes(pid);
      if (rss === null) held.delete(pid);
      else held.set(pid, rss);
      return rss;
    },
    availableBytes() {
      const used = [...held.values()].reduce((a, b) => a + b, 0);
      // The pool reads every running subprocess before the host, so what is held is current.
      held.clear();
      return availableBytes - used;
    },
  };
}
