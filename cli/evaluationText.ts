// How the evaluation commands show an evaluation and its builds to people: the fields, a counts
// line, and the builds table (`kiln eval show`, `kiln eval watch`, `kiln task evaluate --watch`).
import type { BuildView, EvaluationView } from '../protocol/index.js';
import { formatDate, formatFields, formatTable } from './clientOutput.js';

/** Phases after which nothing changes (protocol/events evaluationPhases). */
export const FINAL_PHASES: ReadonlySet<string> = new Set(['completed', 'failed', 'aborted']);

/** An evaluation that failed, was aborted, or completed with failed builds: what makes `eval watch` exit 1. */
export const evaluationFailed = (e: EvaluationView): boolean => e.phase === 'failed' || e.phase === 'aborted' || e.builds.failed > 0;

export const countsLine = (b: EvaluationView['builds']): string =>
  `${b.total} builds: ${b.completed} completed, ${b.substituted} substituted, ${b.failed} failed, ${b.started} running, ${b.queued} queued${b.aborted > 0 ? `, ${b.aborted} aborted` : ''}`;

export const showEvaluation = (e: EvaluationView): string => formatFields([
  ['Evaluation', e.id],
  ['Project', `${e.project} (task ${e.task})`],
  ['Commit', e.commit ?? '-'],
  ['Attribute', e.attr],
  ['Trigger', `${e.trigger}${e.branch ? ` (${e.branch})` : ''}${e.pull_request !== null ? ` (#${e.pull_request})` : ''}`],
  ['Phase', e.phase],
  ...(e.error ? [['Error', e.error] as [string, string]] : []),
  ['Created', formatDate(e.created_at)],
  ['Finished', formatDate(e.finished_at)],
  ['Builds', countsLine(e.builds)],
]);

/** Entry points first, then by name. */
export const sortBuilds = (builds: readonly BuildView[]): BuildView[] =>
  [...builds].sort((a, b) => Number(b.entry_point) - Number(a.entry_point) || a.name.localeCompare(b.name));

export const buildsTable = (builds: readonly BuildView[]): string =>
  formatTable(['BUILD', 'NAME', 'STATUS', 'ATTRIBUTE'], sortBuilds(builds).map((b) => [
    b.build_id, b.name, b.failure ? `${b.status} (${b.failure.class})` : b.status, b.attr ?? '-',
  ]));

export interface EvaluationWithBuilds {
  evaluation: EvaluationView;
  builds: BuildView[];
}

export const showEvaluationWithBuilds = (r: EvaluationWithBuilds): string =>
  r.builds.length === 0 ? showEvaluation(r.evaluation) : `${showEvaluation(r.evaluation)}\n\n${buildsTable(r.builds)}`;
