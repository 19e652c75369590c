// The evaluation as a status report shows it (docs/git-hosts.md, "Status reports"): its phase, and
// its builds as its organization sees them (services/builds/organizationStatus.ts): another
// organization's completion of a build that failed for this one is not its success.
import type { Queryable } from '../../storage/index.js';
import { failureFor, statusFor } from '../builds/index.js';
import { logHead, type EvaluationSnapshot } from './reportContent.js';

/** The evaluation as a report shows it; null when it is gone. */
export async function evaluationSnapshot(sql: Queryable, evaluationId: string): Promise<EvaluationSnapshot | null> {
  const [evaluation] = await sql<{ phase: string; error: string | null; organization_id: string }[]>`
    select e.phase, e.error, p.organization_id from evaluations e join tasks t on t.id = e.task_id join projects p on p.id = t.project_id
    where e.id = ${evaluationId}`;
  if (!evaluation) return null;
  // the builds as the evaluation's organization sees them: another's completion is not its success
  const organization = sql`${evaluation.organization_id}::uuid`;
  const builds = await sql<{ status: string; entry_point: boolean; attr: string | null; name: string; derivation_build_id: string; failure_reason: string | null; scoped: boolean; kept_attempt: number | null }[]>`
    select ${statusFor(sql, organization)} as status, b.entry_point, b.attr, d.name, db.id as derivation_build_id,
      ${failureFor(sql, organization, 'reason')} as failure_reason, db.failed_for is not null as scoped,
      (select sf.failure_attempt from derivation_build_scoped_failures sf where db.failed_for is not null
        and sf.derivation_build_id = db.id and sf.organization_id = ${organization}) as kept_attempt
    from builds b join derivation_builds db on db.id = b.derivation_build_id join derivations d on d.id = db.derivation_id
    where b.evaluation_id = ${evaluationId}`;
  const failed = builds.filter((b) => b.status === 'failed');
  const failedBuilds = [];
  for (const f of failed.slice(0, 10)) {
    // A failure that stands for some organizations only is this one's own attempt's: the latest
    // attempt may be another organization's server's (its log, perhaps a public check run's). One
    // whose attempt is unknown (kept before migration 0079 recorded it, or none) shows no log head.
    const attempt = f.scoped
      ? sql`${f.kept_attempt}::int`
      : sql`(select max(attempt) from build_log_chunks where derivation_build_id = ${f.derivation_build_id})`;
    const [first] = await sql<{ data: Buffer }[]>`
      select data from build_log_chunks where derivation_build_id = ${f.derivation_build_id} and attempt = ${attempt}
      order by seq limit 1`;
    failedBuilds.push({ name: f.name, reason: f.failure_reason, logHead: first ? logHead(first.data) : '' });
  }
  return {
    id: evaluationId,
    phase: evaluation.phase,
    error: evaluation.error,
    builds: {
      total: builds.length,
      done: builds.filter((b) => b.status === 'completed' || b.status === 'substituted').length + failed.length,
      failed: failed.length,
    },
    entryPoints: builds.filter((b) => b.entry_point).map((b) => ({ attr: b.attr ?? b.name, status: b.status })).sort((a, b) => a.attr.localeCompare(b.attr)),
    failedBuilds,
  };
}
