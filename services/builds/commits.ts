// GET /commits/{id} (docs/builds.md, "Commits"): a commit is known by the evaluations made at
// it. kiln stores the hash and the repository of each evaluation, not the commit's message or
// author (workers fetch the repository, the server never does), so those two are null.
import type { Sql } from 'postgres';
import { ApiError } from '../../protocol/index.js';
import type { Principal } from '../access/index.js';
import { demandProjectRef } from '../access/index.js';

export interface CommitEvaluation {
  id: string;
  project: string;
  task: string;
  phase: string;
  created_at: Date;
  finished_at: Date | null;
}

export interface CommitView {
  hash: string;
  message: string | null;
  author: string | null;
  repositories: string[];
  evaluations: CommitEvaluation[];
}

const MAX_EVALUATIONS = 200;

export function commitsService(sql: Sql) {
  return {
    /** The commit as the caller's visible evaluations know it; 404 when none of them was made at it. */
    async get(who: Principal, hash: string): Promise<CommitView> {
      const rows = await sql<(CommitEvaluation & { project_id: string; repository: string })[]>`
        select e.id, o.name || '/' || p.name as project, t.name as task, e.phase, e.created_at, e.finished_at, p.id as project_id, e.repository
        from evaluations e join tasks t on t.id = e.task_id join projects p on p.id = t.project_id join organizations o on o.id = p.organization_id
        where e.commit = ${hash} order by e.created_at desc limit ${MAX_EVALUATIONS}`;
      // Per project: seen, hidden (404: the project is invisible) or forbidden (403: visible, but a key lacks viewProject).
      const access = new Map<string, 'seen' | 'hidden' | 'forbidden'>();
      for (const projectId of new Set(rows.map((r) => r.project_id))) {
        access.set(projectId, await demandProjectRef(sql, who, projectId, 'viewProject').then(() => 'seen' as const, (e: unknown) => {
          if (e instanceof ApiError && e.status === 404) return 'hidden' as const;
          if (e instanceof ApiError && e.status === 403) return 'forbidden' as const;
          throw e;
        }));
      }
      const seen = rows.filter((r) => access.get(r.project_id) === 'seen');
      if (seen.length === 0) {
        if ([...access.values()].includes('forbidden')) throw new ApiError('forbidden', `viewing commit ${hash} needs viewProject on a project evaluated at it`);
        throw new ApiError('not_found', `no evaluation you can see was made at commit ${hash}`);
      }
      return {
        hash,
        message: null,
        author: null,
        repositories: [...new Set(seen.map((r) => r.repository))].sort(),
        evaluations: seen.map(({ id, project, task, phase, created_at, finished_at }) => ({ id, project, task, phase, created_at, finished_at })),
      };
    },
  };
}
export type CommitsService = ReturnType<typeof commitsService>;
