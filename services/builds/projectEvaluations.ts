// A project's evaluations across its tasks, newest first, a page at a time (the project page's list).
import type { Sql } from 'postgres';
import type { EvaluationTrigger, ProjectEvaluationsQuery } from '../../protocol/index.js';

export interface EvaluationSummaryRow {
  id: string;
  task: string;
  commit: string | null;
  attr: string;
  trigger: EvaluationTrigger;
  branch: string | null;
  pull_request: number | null;
  phase: string;
  error: string | null;
  created_at: Date;
  finished_at: Date | null;
}

export interface ProjectEvaluationsPageView {
  evaluations: EvaluationSummaryRow[];
  page: number;
  per_page: number;
  total: number;
}

export async function listProjectEvaluations(sql: Sql, projectId: string, query: ProjectEvaluationsQuery): Promise<ProjectEvaluationsPageView> {
  // each filter holds when it is not given
  const filters = () => sql`
    ${query.branch === undefined ? sql`` : sql`and e.branch = ${query.branch}`}
    ${query.pull_request === undefined ? sql`` : sql`and e.pull_request = ${query.pull_request}`}
    ${query.trigger === undefined ? sql`` : sql`and e.trigger = ${query.trigger}`}`;
  const [count] = await sql<{ n: number }[]>`
    select count(*)::int as n from evaluations e join tasks t on t.id = e.task_id where t.project_id = ${projectId} ${filters()}`;
  const evaluations = await sql<EvaluationSummaryRow[]>`
    select e.id, t.name as task, e.commit, e.wildcard as attr, e.trigger, e.branch, e.pull_request, e.phase, e.error, e.created_at, e.finished_at
    from evaluations e join tasks t on t.id = e.task_id
    where t.project_id = ${projectId} ${filters()}
    order by e.created_at desc, e.id
    limit ${query.per_page} offset ${(query.page - 1) * query.per_page}`;
  return { evaluations, page: query.page, per_page: query.per_page, total: count!.n };
}
