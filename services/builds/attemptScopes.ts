// Whose attempts (docs/builds.md, "Whose attempts"; migration 0086): a shared build's attempts spent
// on a worker only some organizations trust (a build server, a worker registered per project) count
// against those organizations only; those spent on kiln's own workers count for every organization.
// So a tenant's worker that fails a shared build transiently, or takes it and hangs up, until
// build.maxAttempts is spent ends the build for its own organizations only: another organization
// still has all of its attempts, and the failure stands for those that spent them (failed_for).
import type { Queryable } from '../../storage/index.js';

/** The attempts of a build spent so far, as each organization counts them. */
export interface SpentAttempts {
  /** spent on kiln's own workers (or on none in particular: a dying server process): every organization's */
  open: number;
  /** per organization with attempts on its own workers: those plus `open` */
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

/** The organizations outside `failedFor` that have spent `maxAttempts` with attempts of their own workers: the build fails for them. */
export function exhausted(spent: SpentAttempts, maxAttempts: number, failedFor: readonly string[] | null): string[] {
  return [...spent.byOrganization].filter(([o, n]) => n >= maxAttempts && !(failedFor ?? []).includes(o)).map(([o]) => o).sort();
}

/**
 * The attempts spent up to attempt `attempt` of the build, that one included as spent on the
 * worker of the row's current dispatch (worker_scope): every dispatch but the declined ones
 * (derivation_builds.declines), as before, split by the scoped attempts recorded.
 */
export async function spentAttempts(sql: Queryable, derivationBuildId: string, attempt: number): Promise<SpentAttempts & { workerScope: string[] | null; failedFor: string[] | null }> {
  const [row] = await sql<{ declines: number; worker_scope: string[] | null; failed_for: string[] | null; scoped: { attempt: number; scope: string[] }[] }[]>`
    select db.declines, db.worker_scope, db.failed_for,
      coalesce((select json_agg(json_build_object('attempt', s.attempt, 'scope', s.scope)) from derivation_build_scoped_attempts s
                where s.derivation_build_id = db.id and s.attempt < ${attempt}), '[]') as scoped
    from derivation_builds db where db.id = ${derivationBuildId}`;
  const workerScope = row?.worker_scope && row.worker_scope.length > 0 ? row.worker_scope : null;
  const scoped = [...(row?.scoped ?? []), ...(workerScope ? [{ attempt, scope: workerScope }] : [])];
  const total = Math.max(1, attempt - (row?.declines ?? 0));
  const open = Math.max(0, total - scoped.length);
  const byOrganization = new Map<string, number>();
  for (const { scope } of scoped) for (const o of scope) byOrganization.set(o, (byOrganization.get(o) ?? open) + 1);
  return { open, byOrganization, workerScope, failedFor: row?.failed_for ?? null };
}

/**
 * Records attempt `attempt` as spent on the worker of its dispatch when that worker is one only some
 * organizations trust (nothing for kiln's own). Called where the attempt is spent: a failure that is
 * not a wait for inputs, a loss after the build began, a completion another organization re-queues.
 */
export async function recordScopedAttempt(sql: Queryable, derivationBuildId: string, attempt: number): Promise<void> {
  await sql`
    insert into derivation_build_scoped_attempts (derivation_build_id, attempt, scope)
    select id, ${attempt}, worker_scope from derivation_builds
    where id = ${derivationBuildId} and attempts = ${attempt} and worker_scope is not null and cardinality(worker_scope) > 0
    on conflict (derivation_build_id, attempt) do update set scope = excluded.scope`;
}

/** Fresh attempts for these builds (a restart, a retry, a claim of another organization's failure): the counts and their record start over. */
export async function freshAttempts(sql: Queryable, derivationBuildIds: readonly string[]): Promise<void> {
  if (derivationBuildIds.length === 0) return;
  await sql`update derivation_builds set attempts = 0, declines = 0 where id = any(${derivationBuildIds as string[]}::uuid[])`;
  await sql`delete from derivation_build_scoped_attempts where derivation_build_id = any(${derivationBuildIds as string[]}::uuid[])`;
}
