// What the evaluation page derives from the API's views and the live events: the open phases, the
// progress, and a build list (read a page at a time, so with gaps) that status changes update in place.
import type { BuildView, EvaluationView } from '$protocol/api/evaluations';
import type { LiveEvent } from '$lib/live';

/** Phases an evaluation can still leave (docs/builds.md, "Phases and transitions"); abort is offered in these. */
export const OPEN_PHASES = new Set(['queued', 'waiting', 'approval_granted', 'fetching', 'evaluating', 'building']);

export const BUILD_STATUSES = ['queued', 'started', 'completed', 'failed', 'substituted', 'aborted'] as const;
export type BuildStatusName = (typeof BUILD_STATUSES)[number];

/** Builds that are final, for the progress bar. */
export function finishedBuilds(counts: EvaluationView['builds']): number {
  return counts.completed + counts.failed + counts.substituted + counts.aborted;
}

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);

/**
 * Applies build.status_changed to the list by build id. Returns the new list (a copy when a build
 * changed), or null when the event names a build the page does not have (then it refetches).
 */
export function applyBuildEvent(builds: readonly (BuildView | undefined)[], index: ReadonlyMap<string, number>, event: LiveEvent): readonly (BuildView | undefined)[] | null {
  const id = str(event.content['build_id']);
  const status = str(event.content['status']);
  if (!id || !status) return builds;
  const at = index.get(id);
  if (at === undefined) return null;
  const old = builds[at];
  if (!old) return null;
  if (old.status === status) return builds;
  const next = builds.slice();
  const failure = str(event.content['failure']);
  next[at] = {
    ...old,
    status,
    ...(status === 'started' && !old.started_at ? { started_at: event.at } : {}),
    ...(['completed', 'failed', 'substituted', 'aborted'].includes(status) ? { finished_at: event.at } : {}),
    ...(failure && !old.failure ? { failure: { class: failure, reason: null, message: null } } : {}),
  };
  return next;
}
