// The bookkeeping of the spec's two free re-queue loops (docs/builds.md, "Scheduler rules";
// columns from migration 0013). Neither loop counts as a build attempt; each has its own bound.
import type { Sql } from 'postgres';

/** After a build went back to the queue because its inputs were not available: one loop more, the attempt given back. */
export async function countInputsLoop(sql: Sql, derivationBuildId: string): Promise<void> {
  await sql`
    update derivation_builds set input_loops = input_loops + 1, attempts = greatest(attempts - 1, 0)
    where id = ${derivationBuildId}`;
}

export async function inputsLoops(sql: Sql, derivationBuildId: string): Promise<number> {
  const [row] = await sql<{ input_loops: number }[]>`select input_loops from derivation_builds where id = ${derivationBuildId}`;
  return row?.input_loops ?? 0;
}

/**
 * The direct inputs of a build that were marked substituted (a cache claimed their outputs): when
 * the worker could not fetch its inputs, these are the suspects. Each is counted as a miss.
 */
export async function countSubstituteMisses(sql: Sql, derivationBuildId: string): Promise<string[]> {
  const rows = await sql<{ id: string }[]>`
    update derivation_builds dep set substitute_misses = dep.substitute_misses + 1
    from derivation_builds db join derivation_edges x on x.derivation_id = db.derivation_id
    where db.id = ${derivationBuildId} and dep.derivation_id = x.depends_on and dep.status = 'substituted'
    returning dep.id`;
  return rows.map((r) => r.id);
}
