// A shared build as one organization sees it (docs/builds.md, "Whose failure"). A derivation_build
// is one record for every tenant, but a final failure on a worker only some organizations trust
// stands for them (failed_for), and another organization's server may complete the build after it:
// the record then reads `completed` (done_for: that organization) while the failure still stands
// for the first. This is the one definition of what each organization reads: completed, but failed
// for an organization in failed_for and not in done_for (kiln's own worker's completion clears
// failed_for: it stands for everyone), with the failure migration 0079 kept for it. Every read that
// shows a build within an evaluation goes through these fragments, over derivation_builds `db` and
// the evaluation's organization.
import type { Fragment, TransactionSql } from 'postgres';
import type { Queryable } from '../../storage/index.js';

/** The organization of an evaluation (a uuid expression, or a correlated column such as b.evaluation_id). */
export const organizationOfEvaluation = (sql: Queryable, evaluationId: Fragment) => sql`
  (select op.organization_id from evaluations oe join tasks ot on ot.id = oe.task_id join projects op on op.id = ot.project_id where oe.id = ${evaluationId})`;

/** Over a db with failed_for set: `org` is in the array column `column` (done_for may be null). */
const isIn = (sql: Queryable, org: Fragment, column: 'done_for' | 'failed_for') => sql`
  (${org} = any(coalesce(db.${sql(column)}, '{}')))`;

/**
 * The build's (db) status as the organization `org` (a uuid expression) sees it. With failed_for
 * set, a final record reads by the organization's own outcome: failed where it is in failed_for
 * and not in done_for (another organization's completion is not its success), completed where it
 * is in done_for (another organization's failure is not its failure; a completion that also stands
 * for it wins over its earlier failure, as on a completed record). The cheap conditions come first,
 * in a CASE, so the organization (perhaps a subquery) is only evaluated for such a row.
 */
export const statusFor = (sql: Queryable, org: Fragment) => sql`
  (case when db.failed_for is null or db.status not in ('completed', 'failed') then db.status
        when db.status = 'completed' and ${isIn(sql, org, 'failed_for')} and not ${isIn(sql, org, 'done_for')} then 'failed'
        when db.status = 'failed' and ${isIn(sql, org, 'done_for')} then 'completed'
        else db.status end)`;

/**
 * One failure column (class, reason, message) as `org` sees it. Without failed_for the record's
 * failure stands for everyone. With it, whatever the record's status, an organization's failure is
 * only its own kept one (in failed_for, not in done_for); any other reads none: the record's
 * failure may be another organization's (its server's class, reason and message).
 */
export const failureFor = (sql: Queryable, org: Fragment, column: 'class' | 'reason' | 'message') => {
  const name = `failure_${column}`;
  return sql`
    (case when db.failed_for is null then (case when db.status <> 'completed' then db.${sql(name)} end)
          when ${isIn(sql, org, 'failed_for')} and not ${isIn(sql, org, 'done_for')} then
            (select sf.${sql(name)} from derivation_build_scoped_failures sf where sf.derivation_build_id = db.id and sf.organization_id = ${org})
          else null end)`;
};

/**
 * Whether the failure of db stands for `org` (failed_for null: for everyone): the events of a
 * final failure go to its evaluations only (buildStatus.ts).
 */
export const failureStandsFor = (sql: Queryable, org: Fragment) => sql`
  (db.failed_for is null or ${isIn(sql, org, 'failed_for')})`;

/** `status, failure_class, failure_reason, failure_message` of db as `org` sees them. */
export const seenColumns = (sql: Queryable, org: Fragment) => sql`
  ${statusFor(sql, org)} as status, ${failureFor(sql, org, 'class')} as failure_class,
  ${failureFor(sql, org, 'reason')} as failure_reason, ${failureFor(sql, org, 'message')} as failure_message`;

/**
 * Keeps a final failure for the organizations it stands for (those just added to failed_for: the
 * scope of the worker that failed it, or a dependency failure's), so another scope's completion
 * does not erase it for them. Called with the failure, in its transaction; nothing for a failure
 * that stands for everyone.
 */
export async function keepScopedFailure(tx: TransactionSql, derivationBuildId: string, organizations: readonly string[] | null): Promise<void> {
  if (!organizations || organizations.length === 0) return;
  await tx`
    insert into derivation_build_scoped_failures (derivation_build_id, organization_id, failure_class, failure_reason, failure_message, failure_attempt)
    select db.id, o.id, db.failure_class, db.failure_reason, db.failure_message, db.attempts
    from derivation_builds db, unnest(${organizations as string[]}::uuid[]) as f(org)
    -- failed_for may name an organization deleted since (an array has no foreign key): skipped
    join organizations o on o.id = f.org
    where db.id = ${derivationBuildId} and db.failure_class is not null
    on conflict (derivation_build_id, organization_id) do update
      set failure_class = excluded.failure_class, failure_reason = excluded.failure_reason,
        failure_message = excluded.failure_message, failure_attempt = excluded.failure_attempt`;
}
