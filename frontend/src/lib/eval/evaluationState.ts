// What the evaluation page derives from the API's views and the live events: the open phases, the
// progress, and a build list (read a page at a time, so with gaps) that status changes update in place.
import type { BuildView, EvaluationView } from '$protocol/api/evaluations';
import type { BuildStatus, EvaluationPhase } from '$protocol/events/buildEvents';
import type { LiveEvent } from '$lib/live';

/** Whether a phase is one an evaluation can still leave (docs/builds.md, "Phases and transitions"); a new phase fails the type check here until it is sorted. */
const PHASE_IS_OPEN: Record<EvaluationPhase, boolean> = {
  queued: true, waiting: true, approval_granted: true, fetching: true, evaluating: true, building: true,
  completed: false, failed: false, aborted: false,
};
/** Phases abort is offered in (a set of strings: EvaluationView's phase is a string) */
export const OPEN_PHASES: ReadonlySet<string> = new Set(Object.entries(PHASE_IS_OPEN).filter(([, open]) => open).map(([phase]) => phase));

/** Every build status once, in the order the filter shows them (protocol/events' buildStatuses; a value import would bring zod into the shell). */
const STATUS_ORDER: Record<BuildStatus, number> = { queued: 0, started: 1, completed: 2, failed: 3, substituted: 4, aborted: 5 };
export const BUILD_STATUSES = (Object.keys(STATUS_ORDER) as BuildStatus[]).sort((a, b) => STATUS_ORDER[a] - STATUS_ORDER[b]);

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
