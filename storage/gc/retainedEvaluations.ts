// The evaluations whose closures are live (docs/gc.md, "The live set"): per task the newest N (the
// task's keep_evaluations capped by eval.maxKeep, 0 meaning no limit on either side, as
// services/builds/evaluationRetention.ts prunes), plus every evaluation not yet final unless it is
// wedged: in one phase (updated_at) longer than gc.wedgedEvalHours (0: none is wedged).
import type { Fragment, ISql } from 'postgres';

export interface RetentionRules {
  /** eval.maxKeep */
  maxKeep: number;
  /** gc.wedgedEvalHours */
  wedgedEvalHours: number;
  now: Date;
}

/** A query fragment selecting the ids of retained evaluations, read afresh by each statement that embeds it. */
export function retainedEvaluationIds(sql: ISql, rules: RetentionRules): Fragment {
  const wedgedBefore = new Date(rules.now.getTime() - rules.wedgedEvalHours * 3600_000);
  const open = rules.wedgedEvalHours > 0
    ? sql`(r.phase not in ('completed', 'failed', 'aborted') and r.updated_at > ${wedgedBefore})`
    : sql`r.phase not in ('completed', 'failed', 'aborted')`;
  return sql`
    select r.id from (
      select e.id, e.phase, e.updated_at,
             row_number() over (partition by e.task_id order by e.created_at desc, e.id desc) as n,
             least(nullif(t.keep_evaluations, 0), nullif(${rules.maxKeep}::integer, 0)) as keep
      from evaluations e join tasks t on t.id = e.task_id) r
    where r.keep is null or r.n <= r.keep or ${open}`;
}
