// Whose attempts (docs/builds.md, "Whose attempts"; migration 0086): a shared build's attempts spent
// on a worker only some organizations trust (a build server, a worker registered per project) count
// against those organizations only; those spent on kiln's own workers count for every organization.
// So a tenant's worker that fails a shared build transiently, or takes it and hangs up, until
// build.maxAttempts is spent ends the build for its own organizations only: another organization
// still has all of its attempts, and the failure stands for those that spent them (failed_for).
// Only the ledger counts (review r7b): one row per spent attempt, an empty scope for kiln's own
// workers; a dispatch it has no row for (a decline, a loss before the build began, a completion)
// spent nothing, so no organization can spend another's attempts with attempts it never failed.
import type { Queryable } from '../../storage/index.js';

/** The attempts of a build spent so far, as each organization counts them. */
export interface SpentAttempts {
  /** spent on kiln's own workers (or on none in particular: a dying server process): every organization's */
  open: number;
  /**
   * per organization with attempts on its own workers: those plus `open`. An organization the build
   * completed for (done_for) is left out: it has its outcome, nothing of it can be exhausted.
   */
  byOrganization: ReadonlyMap<string, number>;
}

/** The attempts an organization has spent (the open ones when it spent none on its own workers). */
const spentBy = (spent: SpentAttempts, organization: string) => spent.byOrganization.get(organization) ?? spent.open;

/**
 * The count a failure on a worker of `scope` is decided by: the open attempts for kiln's own worker
 * (its failure stands for everyone), else the fewest any organization of its scope spent (its
 * failure stands for them all, so each must have spent build.maxAttempts).
 */
export function spentFor(spent: SpentAttempts, scope: readonly string[] | null): number {
  if (scope === null || scope.length === 0) return spent.open;
  return Math.min(...scope.map((o) => spentBy(spent, o)));
}

/**
 * The organizations a failure on a worker of `scope` ends the build for, though the worker's count
 * has not: those that have now spent `maxAttempts`, outside `failedFor`, and that the failing
 * attempt counted for (the worker's scope; every organization for kiln's own worker). Another
 * organization's worker's failure never exhausts an organization whose count it is not part of.
 */
export function exhausted(spent: SpentAttempts, maxAttempts: number, failedFor: readonly string[] | null, scope: readonly string[] | null): string[] {
  const failed = new Set(failedFor ?? []);
  const countedFor = scope === null || scope.length === 0 ? null : new Set(scope);
  return [...spent.byOrganization]
    .filter(([o, n]) => n >= maxAttempts && !failed.has(o) && (countedFor === null || countedFor.has(o)))
    .map(([o]) => o).sort();
}

/**
 * The attempts spent up to attempt `attempt` of the build, that one included as spent on the
 * worker of the row's current dispatch (worker_scope): the attempts the ledger records
 * (derivation_build_scoped_attempts), and nothing else. A dispatch the ledger has no row for (a
 * decline, a loss before the build began, a completion) spent nothing.
 */
export async function spentAttempts(sql: Queryable, derivationBuildId: string, attempt: number): Promise<SpentAttempts & { workerScope: string[] | null; failedFor: string[] | null }> {
  const [row] = await sql<{ worker_scope: string[] | null; failed_for: string[] | null; done_for: string[] | null; scoped: { attempt: number; scope: string[] }[] }[]>`
    select db.worker_scope, db.failed_for, db.done_for,
      coalesce((select json_agg(json_build_object('attempt', s.attempt, 'scope', s.scope)) from derivation_build_scoped_attempts s
                where s.derivation_build_id = db.id and s.attempt < ${attempt}), '[]') as scoped
    from derivation_builds db where db.id = ${derivationBuildId}`;
  const workerScope = row?.worker_scope && row.worker_scope.length > 0 ? row.worker_scope : null;
  const spent = [...(row?.scoped ?? []), { attempt, scope: workerScope ?? [] }];
  const open = spent.filter((s) => s.scope.length === 0).length;
  const done = new Set(row?.done_for ?? []);
  const byOrganization = new Map<string, number>();
  for (const { scope } of spent) for (const o of scope) if (!done.has(o)) byOrganization.set(o, (byOrganization.get(o) ?? open) + 1);
  return { open, byOrganization, workerScope, failedFor: row?.failed_for ?? null };
}

/**
 * Records attempt `attempt` as spent, on the worker of its dispatch: its scope (worker_scope), or
 * none for kiln's own worker, counting for everyone, or for a job whose server process died
 * (`everyone`). Called where an attempt is spent: a failure that is not a wait for inputs, a loss
 * after the build began, a cluster job's abort, an orphaned job. Nothing when the row is no longer
 * at that attempt.
 */
export async function recordSpentAttempt(sql: Queryable, derivationBuildIds: string | readonly string[], attempt: number | null, everyone = false): Promise<void> {
  const ids = typeof derivationBuildIds === 'string' ? [derivationBuildIds] : derivationBuildIds;
  if (ids.length === 0) return;
  await sql`
    insert into derivation_build_scoped_attempts (derivation_build_id, attempt, scope)
    select id, attempts, case when ${everyone} then '{}'::uuid[] else coalesce(worker_scope, '{}') end from derivation_builds
    where id = any(${ids as string[]}::uuid[]) and attempts > 0 and (${attempt}::int is null or attempts = ${attempt}::int)
    on conflict (derivation_build_id, attempt) do update set scope = excluded.scope`;
}

/** Fresh attempts for these builds (a restart, a retry, a claim of another organization's failure): the counts and their record start over. */
export async function freshAttempts(sql: Queryable, derivationBuildIds: readonly string[]): Promise<void> {
  if (derivationBuildIds.length === 0) return;
  await sql`update derivation_builds set attempts = 0, declines = 0 where id = any(${derivationBuildIds as string[]}::uuid[])`;
  await forgetSpentAttempts(sql, derivationBuildIds);
}

/**
 * The spent attempts forgotten, the dispatch numbers kept (each attempt keeps its job id and log):
 * a build queued again after it completed (its outputs evicted) or was aborted (reached again)
 * failed nothing, so it starts over with all of its attempts.
 */
export async function forgetSpentAttempts(sql: Queryable, derivationBuildIds: readonly string[]): Promise<void> {
  if (derivationBuildIds.length === 0) return;
  await sql`delete from derivation_build_scoped_attempts where derivation_build_id = any(${derivationBuildIds as string[]}::uuid[])`;
}
