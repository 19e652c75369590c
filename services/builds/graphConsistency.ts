// The build graph consistency check (metrics.graphConsistencyIntervalSecs; docs/builds.md, "Graph
// consistency"). The build graph refers to the NARs of finished builds through
// derivation_builds.outputs_cached, the NAR reference counter of the option's text: true while
// some cache holds every output. Deleting a path through the API clears it in the same transaction
// (services/caches/evictedOutputs.ts), but paths also leave without that: a whole cache deleted
// (its signature rows cascade), collection, a row removed by hand. A finished build left marked
// would be taken for granted by the next evaluation and its dependants would wait on an output
// nobody can substitute; the check clears the mark, so that evaluation queues it again
// (graphRecorder.ts).
//
// The walk goes over finished builds in id order in slices, each one statement, so it never holds
// locks a build result waits on for long.
import type { Sql } from 'postgres';

export interface GraphConsistencyReport {
  /** finished builds looked at */
  checked: number;
  /** builds whose outputs no cache holds any more, marked not cached */
  repaired: number;
}

const SLICE = 5000;

export async function runGraphConsistencyCheck(sql: Sql, sliceSize = SLICE): Promise<GraphConsistencyReport> {
  const report: GraphConsistencyReport = { checked: 0, repaired: 0 };
  let after = '00000000-0000-0000-0000-000000000000';
  for (;;) {
    // A store path's hash part is the 32 characters after the store directory; a floating
    // content-addressed output (null) has no path to look for.
    const [slice] = await sql<{ last: string | null; checked: number; repaired: number }[]>`
      with finished as (
        select db.id, db.derivation_id from derivation_builds db
        where db.id > ${after}::uuid and db.status in ('completed', 'substituted')
        order by db.id limit ${sliceSize}
      ), lost as (
        update derivation_builds db set outputs_cached = false, updated_at = now()
        from finished f join derivations d on d.id = f.derivation_id
        where db.id = f.id and db.outputs_cached
          and exists (
            select from jsonb_each_text(d.outputs) o
            where o.value is not null and not exists (
              select from cached_paths p join path_signatures s on s.cached_path_id = p.id
              where p.hash_part = substring(o.value from '/([0-9a-df-np-sv-z]{32})-[^/]*$')))
        returning db.id
      )
      select (select max(id::text) from finished) as last,
             (select count(*)::int from finished) as checked,
             (select count(*)::int from lost) as repaired`;
    report.checked += slice!.checked;
    report.repaired += slice!.repaired;
    if (slice!.last === null || slice!.checked < sliceSize) return report;
    after = slice!.last;
  }
}
