// The running builds' counters so far, for the heartbeats (worker.build.metrics; docs/metrics.md,
// "Build and evaluation statistics"): each build with a cgroup is registered while it runs; a
// heartbeat takes the last readings at once (it must not wait on the filesystem) and starts the
// next read, so a reading is at most one heartbeat interval old.
import type { BuildReading } from '../protocol/index.js';
import type { BuildCgroup } from './buildCgroup.js';

interface Running {
  startedAt: number;
  cgroup: Pick<BuildCgroup, 'readNow'>;
  last: BuildReading | null;
}

export class BuildReadings {
  private readonly running = new Map<string, Running>();
  private refreshing = false;

  constructor(private readonly now: () => number = Date.now) {}

  add(jobId: string, cgroup: Pick<BuildCgroup, 'readNow'>): void {
    this.running.set(jobId, { startedAt: this.now(), cgroup, last: null });
  }

  remove(jobId: string): void {
    this.running.delete(jobId);
  }

  /** The last reading of each running build, and a read started for the next heartbeat. */
  snapshot(): BuildReading[] {
    const readings = [...this.running.values()].flatMap((r) => (r.last === null ? [] : [r.last]));
    void this.refresh();
    return readings;
  }

  private async refresh(): Promise<void> {
    if (this.refreshing) return;
    this.refreshing = true;
    try {
      for (const [jobId, running] of this.running) {
        const read = await running.cgroup.readNow().catch(() => null);
        // A build that ended meanwhile keeps no reading.
        if (read !== null && this.running.get(jobId) === running) running.last = { jobId, wallSeconds: (this.now() - running.startedAt) / 1000, ...read };
      }
    } finally {
      this.refreshing = false;
    }
  }
}
