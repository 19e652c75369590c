// What a status report says for an evaluation at a moment (docs/git-hosts.md, "Status reports"):
// its phase as a check run's status and conclusion (or a commit status's state), a title, and a
// summary with the build counts, the entry points and the failed builds with their first log
// lines. Pure: the reporter reads the evaluation and sends what this returns.

export interface EvaluationSnapshot {
  id: string;
  phase: string;
  error: string | null;
  builds: { total: number; done: number; failed: number };
  entryPoints: { attr: string; status: string }[];
  failedBuilds: { name: string; reason: string | null; logHead: string }[];
}

export type CheckRunStatus = 'queued' | 'in_progress' | 'completed';
export type CheckConclusion = 'success' | 'failure' | 'cancelled';

export interface ReportContent {
  status: CheckRunStatus;
  conclusion: CheckConclusion | null;
  /** commit status state, where the host has no check runs */
  state: 'pending' | 'success' | 'failure' | 'error';
  title: string;
  summary: string;
  detailsUrl: string;
  /** what the reporter compares with the last report, so an unchanged one is not sent again */
  progressKey: string;
}

const FINISHED: Record<string, CheckConclusion> = { completed: 'success', failed: 'failure', aborted: 'cancelled' };
/** check runs cap the summary at 65535 characters; a commit status's description at 140 */
const SUMMARY_MAX = 60_000;
const DESCRIPTION_MAX = 140;
const LOG_LINES = 20;

/** The first lines of a build log, as text to quote in a report. */
export function logHead(log: Buffer | string): string {
  const text = typeof log === 'string' ? log : log.subarray(0, 16_384).toString('utf8');
  return text.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '').split('\n').slice(0, LOG_LINES).join('\n').trimEnd();
}

/** `frontend.url` + the evaluation page */
export function evaluationPageUrl(frontendUrl: string, evaluationId: string): string {
  return `${frontendUrl.replace(/\/+$/, '')}/evals/${evaluationId}`;
}

export function reportContent(snapshot: EvaluationSnapshot, frontendUrl: string): ReportContent {
  const { phase, builds } = snapshot;
  // a completed evaluation with a failed build is a failure of the commit
  const finished = FINISHED[phase] ?? null;
  const conclusion = finished === 'success' && builds.failed > 0 ? 'failure' : finished;
  const status: CheckRunStatus = conclusion !== null ? 'completed' : phase === 'queued' || phase === 'waiting' ? 'queued' : 'in_progress';
  const counts = builds.total === 0 ? '' : `${builds.done} of ${builds.total} builds done${builds.failed > 0 ? `, ${builds.failed} failed` : ''}`;
  const title = conclusion === 'success' ? `Evaluation succeeded${counts ? `: ${counts}` : ''}`
    : conclusion === 'failure' ? `${finished === 'success' ? 'Builds failed' : 'Evaluation failed'}${snapshot.error ? `: ${firstLine(snapshot.error)}` : counts ? `: ${counts}` : ''}`
    : conclusion === 'cancelled' ? 'Evaluation aborted'
    : phase === 'building' ? `Building: ${counts || 'no builds yet'}`
    : phase === 'fetching' || phase === 'evaluating' ? `Evaluating (${phase})`
    : phase === 'waiting' ? 'Waiting for room in a cache' : 'Queued';
  const lines = [`**${title}**`, ''];
  if (snapshot.error) lines.push('```', snapshot.error.slice(0, 4000), '```', '');
  if (snapshot.entryPoints.length > 0) {
    lines.push('| entry point | status |', '|---|---|');
    for (const e of snapshot.entryPoints.slice(0, 200)) lines.push(`| \`${e.attr.replace(/[|`]/g, '')}\` | ${e.status} |`);
    if (snapshot.entryPoints.length > 200) lines.push(`| … ${snapshot.entryPoints.length - 200} more | |`);
    lines.push('');
  }
  for (const f of snapshot.failedBuilds.slice(0, 10)) {
    lines.push(`### ${f.name} failed${f.reason ? ` (${f.reason})` : ''}`, '```', f.logHead.replace(/```/g, "'''"), '```', '');
  }
  let summary = lines.join('\n');
  if (summary.length > SUMMARY_MAX) summary = `${summary.slice(0, SUMMARY_MAX)}\n…`;
  const state = conclusion === 'success' ? 'success' : conclusion === 'failure' ? 'failure' : conclusion === 'cancelled' ? 'error' : 'pending';
  return {
    status, conclusion, state, title: title.slice(0, DESCRIPTION_MAX * 4), summary,
    detailsUrl: evaluationPageUrl(frontendUrl, snapshot.id),
    progressKey: `${phase}:${builds.done}/${builds.total}/${builds.failed}`,
  };
}

/** A commit status's description: the title, short. */
export const statusDescription = (content: ReportContent): string => content.title.slice(0, DESCRIPTION_MAX);

const firstLine = (text: string) => text.split('\n')[0]!.slice(0, 200);
