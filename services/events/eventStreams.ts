// Who may watch which live feed (spec: Firehose, Live updates). Each WebSocket is authorised like
// the GET it mirrors: a task's and an evaluation's like viewing the project, the board, the actor
// transitions and the firehose for superusers, the cache board for the caches the caller can view.
import { ApiError, describeIssue, EventGlob } from '../../protocol/index.js';
import { allCacheRows } from '../../storage/index.js';
import { accessOf } from '../access/index.js';
import { isSuperuser, superuserRefusal, type Principal } from '../access/index.js';
import type { Queryable } from '../../storage/index.js';
import { cacheTarget, demandProjectRef, userOf } from '../access/index.js';

/** What a socket asked for, from its path and query. */
export type LiveRequest =
  | { kind: 'firehose'; globs: string[] }
  | { kind: 'task'; project: string; task: string }
  | { kind: 'evaluation'; evaluation: string }
  | { kind: 'build'; build: string }
  | { kind: 'board' }
  | { kind: 'boardCache' }
  | { kind: 'actors' };

/** What a socket receives, by id. */
export type LiveFeed =
  | { kind: 'firehose'; globs: string[] }
  | { kind: 'task'; taskId: string }
  | { kind: 'evaluation'; evaluationId: string }
  | { kind: 'build'; buildId: string; evaluationId: string }
  | { kind: 'board' }
  | { kind: 'boardCache'; cacheIds: string[] | 'all' }
  | { kind: 'actors' };

/**
 * Evaluations and builds are resolved by the evaluation and build services (services/createServices.ts
 * builds them first): each returns ids when the caller may view the evaluation's project, and throws
 * ApiError 404 otherwise.
 */
export interface LiveResolvers {
  evaluation(who: Principal, id: string): Promise<{ evaluationId: string }>;
  build(who: Principal, id: string): Promise<{ buildId: string; evaluationId: string }>;
}

/** What can be checked without a database: the firehose's globs. Throws ApiError 400. */
export function checkLiveRequest(request: LiveRequest): void {
  if (request.kind !== 'firehose') return;
  for (const glob of request.globs) {
    const parsed = EventGlob.safeParse(glob);
    if (!parsed.success) throw new ApiError('invalid_query', `events: ${JSON.stringify(glob)} ${describeIssue(parsed.error, 'events').reason}`);
  }
}

const superuserOnly = (who: Principal, what: string): void => {
  if (!isSuperuser(who)) throw new ApiError('forbidden', superuserRefusal(who, `${what} is for superusers`));
};

export function eventStreamsService(sql: Queryable, resolvers: LiveResolvers) {
  async function visibleCaches(who: Principal): Promise<string[]> {
    const rows = await allCacheRows(sql, userOf(who));
    // viewCache among the caller's permissions, so a key without it is not told about the cache
    return rows.filter((row) => accessOf(who, cacheTarget(row)).permissions.has('viewCache')).map((row) => row.id);
  }

  return {
    async authorize(who: Principal, request: LiveRequest): Promise<LiveFeed> {
      if (who.kind !== 'user') throw new ApiError('unauthorized', 'live updates need a token: the header Authorization: Bearer <token> or the query parameter token');
      switch (request.kind) {
        case 'firehose': {
          superuserOnly(who, 'the firehose');
          checkLiveRequest(request);
          return { kind: 'firehose', globs: request.globs };
        }
        case 'task': {
          const { row } = await demandProjectRef(sql, who, request.project, 'viewProject');
          const [task] = await sql<{ id: string }[]>`select id from tasks where project_id = ${row.id} and name = ${request.task}`;
          if (!task) throw new ApiError('not_found', `no task "${request.task}" in project "${row.organization}/${row.name}"`);
          return { kind: 'task', taskId: task.id };
        }
        case 'evaluation':
          return { kind: 'evaluation', ...(await resolvers.evaluation(who, request.evaluation)) };
        case 'build':
          return { kind: 'build', ...(await resolvers.build(who, request.build)) };
        case 'board':
          superuserOnly(who, 'the worker board');
          return { kind: 'board' };
        case 'boardCache':
          return { kind: 'boardCache', cacheIds: isSuperuser(who) ? 'all' : await visibleCaches(who) };
        case 'actors':
          superuserOnly(who, 'the supervision tree');
          return { kind: 'actors' };
      }
    },
  };
}
export type EventStreams = ReturnType<typeof eventStreamsService>;
