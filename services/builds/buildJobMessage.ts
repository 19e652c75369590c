// The buildJob a worker gets (docs/builds.md, "Scheduler rules"): substituters are the caches the
// project reads, at serveUrl; targets the caches it writes; time limits the derivation's own, else
// its tasks' (the most generous when several want it), else the server's defaults. Private caches are read with one token (Nix's netrc has one password per
// host) that lasts the job: its time-out (a day without one) and an hour more.
import type { Outgoing } from '../../protocol/index.js';
import { readable, writable, type ProjectCache } from '../caches/index.js';
import type { ReadyBuild } from './schedulerQueries.js';

export interface BuildJobSettings {
  serveUrl: string;
  defaultTimeoutSecs: number;
  defaultMaxSilentSecs: number;
  readToken(cacheIds: readonly string[], ttlSecs: number): string;
}

/** The caches a build of this project pushes to; empty: it cannot be dispatched. */
export const targetCaches = (caches: readonly ProjectCache[]): string[] => writable(caches).map((c) => c.name);

/**
 * The limit of the tasks that want a build: each task's own or the server's default; when several
 * want it, the most generous, so that no task's limit cuts another's build short (0 is none).
 */
export function tasksLimit(limits: readonly number[], serverDefault: number): number {
  const effective = limits.map((limit) => (limit < 0 ? serverDefault : limit)); // -1: the task sets none
  if (effective.length === 0) return serverDefault;
  return effective.includes(0) ? 0 : Math.max(...effective);
}

export function buildJobMessage(jobId: string, build: ReadyBuild, caches: readonly ProjectCache[], settings: BuildJobSettings): Outgoing<'buildJob'> {
  const timeoutSecs = build.timeout_secs ?? tasksLimit(build.task_timeouts, settings.defaultTimeoutSecs);
  const privateIds = readable(caches).filter((c) => !c.public).map((c) => c.id);
  const password = privateIds.length > 0 ? settings.readToken(privateIds, (timeoutSecs || 86_400) + 3600) : null;
  const base = settings.serveUrl.replace(/\/$/, '');
  return {
    t: 'buildJob', jobId, drvPath: build.drv_path,
    substituters: readable(caches).map((c) => ({
      url: `${base}/cache/${c.name}`, publicKeys: [c.publicKey], ...(c.public || password === null ? {} : { password }),
    })),
    targetCaches: targetCaches(caches),
    timeoutSecs,
    maxSilentSecs: build.max_silent_secs ?? tasksLimit(build.task_max_silents, settings.defaultMaxSilentSecs),
  };
}
