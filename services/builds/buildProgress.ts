// build.progress (spec: Live updates): transfer progress of a build, live-only, to the
// /builds/{build}/live sockets of every evaluation's build that shares the derivation_build. The
// scheduler knows derivation_builds; the per-evaluation builds are looked up once and remembered
// briefly, so a stream of progress reports costs one query per build every few seconds, not one
// per report.
import type { BuildStatus } from '../../protocol/index.js';
import type { Events } from '../../storage/index.js';
import { buildsOfDerivationBuild, type BuildRow } from './buildStatus.js';
import type { Clock } from '../../supervisors/index.js';
import type { Queryable } from '../../storage/index.js';

export interface BuildProgress {
  derivationBuildId: string;
  status: BuildStatus;
  /** inputs substituted to the worker, the build itself, outputs uploaded to a cache */
  phase: 'downloading' | 'building' | 'uploading';
  bytes: number;
  totalBytes?: number;
  paths: number;
  totalPaths?: number;
}

/** Publishes build.progress for each of `builds` (the rows of one derivation_build). */
export function emitBuildProgress(events: Pick<Events, 'publish'>, builds: readonly BuildRow[], progress: BuildProgress): void {
  for (const b of builds) {
    events.publish('build.progress', {
      build_id: b.build_id, derivation_build: progress.derivationBuildId, evaluation_id: b.evaluation_id, status: progress.status,
      task: b.task, project: b.project, phase: progress.phase, bytes: progress.bytes, paths: progress.paths,
      ...(progress.totalBytes === undefined ? {} : { total_bytes: progress.totalBytes }),
      ...(progress.totalPaths === undefined ? {} : { total_paths: progress.totalPaths }),
    }, { projectId: b.project_id, organizationId: b.organization_id, taskId: b.task_id, evaluationId: b.evaluation_id, buildId: b.build_id });
  }
}

export interface BuildProgressReporter {
  /** Publishes build.progress for the derivation_build's builds; never throws (progress is best effort). */
  report(progress: BuildProgress): Promise<void>;
  /** Forgets a derivation_build (when it finished), so its rows are not kept. */
  forget(derivationBuildId: string): void;
}

/** How long the builds of a derivation_build are remembered: an evaluation joining later shows up after this. */
const REMEMBER_MS = 5_000;
const MAX_REMEMBERED = 10_000;

export function buildProgressReporter(sql: Queryable, events: Pick<Events, 'publish'>, clock: Clock, onError?: (error: unknown) => void): BuildProgressReporter {
  const remembered = new Map<string, { at: number; builds: BuildRow[] }>();
  return {
    async report(progress) {
      try {
        const now = clock.now().getTime();
        let hit = remembered.get(progress.derivationBuildId);
        if (!hit || now - hit.at >= REMEMBER_MS) {
          hit = { at: now, builds: await buildsOfDerivationBuild(sql, progress.derivationBuildId) };
          if (remembered.size >= MAX_REMEMBERED) remembered.delete(remembered.keys().next().value!);
          remembered.set(progress.derivationBuildId, hit);
        }
        emitBuildProgress(events, hit.builds, progress);
      } catch (error) {
        onError?.(error);
      }
    },
    forget(derivationBuildId) {
      remembered.delete(derivationBuildId);
    },
  };
}
