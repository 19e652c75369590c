// Derivations outside the build closure of every retained evaluation (docs/gc.md, "Orphan
// derivations"): marked when first seen so (derivations.orphaned_since), cleared when an evaluation
// reaches them again, deleted gc.orphanDerivationHours after the mark with their shared build,
// its logs and the builds rows of evaluations that are not retained (foreign keys cascade).
import type { Fragment, ISql, Sql } from 'postgres';

/** A derivation some retained evaluation's builds rows name: for derivations alias d. */
const reached = (sql: ISql, retained: Fragment): Fragment => sql`
  exists (select 1 from derivation_builds db join builds b on b.derivation_build_id = db.id
          where db.derivation_id = d.id and b.evaluation_id in (${retained}))`;

/** Marks derivations nobody retained reaches and clears the mark of those reached again; how many were newly marked. */
export async function markOrphanDerivations(sql: Sql, retained: Fragment, now: Date): Promise<number> {
  await sql`update derivations d set orphaned_since = null where d.orphaned_since is not null and ${reached(sql, retained)}`;
  const marked = await sql`update derivations d set orphaned_since = ${now} where d.orphaned_since is null and not ${reached(sql, retained)}`;
  return marked.count;
}

export interface DeletedDerivations {
  /** marked derivations this batch looked at; 0 when none is left */
  examined: number;
  derivations: number;
  /** log bytes of their builds */
  logBytes: number;
}

/**
 * Deletes up to `limit` derivations marked before `markedBefore` that are still orphans. Their
 * derivation builds are locked first: a graph batch linking one (its foreign key check takes a
 * share lock on it) either committed before, and the check below sees its builds row, or waits and
 * fails on the deleted row instead of losing its builds row to the cascade.
 */
export async function deleteOrphanDerivations(sql: Sql, retained: Fragment, markedBefore: Date, limit = 1000): Promise<DeletedDerivations> {
  return sql.begin(async (tx) => {
    const ids = (await tx<{ id: string }[]>`
      select id from derivations where orphaned_since <= ${markedBefore} order by id limit ${limit}`).map((r) => r.id);
    if (ids.length === 0) return { examined: 0, derivations: 0, logBytes: 0 };
    await tx`select id from derivation_builds where derivation_id = any(${ids}::uuid[]) order by id for update`;
    const deleted = await tx<{ log_bytes: string | null }[]>`
      delete from derivations d where d.id = any(${ids}::uuid[]) and d.orphaned_since <= ${markedBefore}
        and not ${reached(tx, retained)}
      returning (select log_bytes from derivation_builds db where db.derivation_id = d.id) as log_bytes`;
    // Rows reached again meanwhile lose their mark; the next pass sees them live.
    if (deleted.length < ids.length) await tx`update derivations set orphaned_since = null where id = any(${ids}::uuid[])`;
    return { examined: ids.length, derivations: deleted.length, logBytes: deleted.reduce((sum, r) => sum + Number(r.log_bytes ?? 0), 0) };
  });
}
