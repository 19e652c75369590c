// The superuser's view of collection (docs/gc.md, "Passes"): POST /admin/gc requests a pass or a
// deep round now (the lock holder starts it within seconds), GET /admin/gc lists the last runs,
// GET /admin/gc/{id} reads one.
import type { Sql } from 'postgres';
import { ApiError, type GcRequestBody, type GcRunView } from '../../protocol/index.js';
import { findGcRun, recentGcRuns, requestGcRun, type GcRunRow } from '../../storage/index.js';
import type { Clock } from '../../supervisors/index.js';
import { isSuperuser, notFound, superuserRefusal, type Principal } from '../access/index.js';

const RECENT_RUNS = 20;

const toView = (row: GcRunRow): GcRunView => ({
  id: String(row.id),
  kind: row.kind,
  state: row.state,
  requested_at: row.requested_at?.toISOString() ?? null,
  started_at: row.started_at?.toISOString() ?? null,
  finished_at: row.finished_at?.toISOString() ?? null,
  result: (row.result ?? null) as GcRunView['result'],
  error: row.error,
});

const demandSuperuser = (who: Principal): void => {
  if (!isSuperuser(who)) throw new ApiError('forbidden', superuserRefusal(who, 'only superusers may run or read garbage collection'));
};

export function gcAdminService({ sql, clock, wake }: { sql: Sql; clock: Clock; wake: () => void }) {
  return {
    async request(who: Principal, body: GcRequestBody): Promise<GcRunView> {
      demandSuperuser(who);
      const run = await requestGcRun(sql, body.deep ? 'deep' : 'pass', who.kind === 'user' ? who.userId : null, clock.now());
      wake();
      return toView(run);
    },

    async recent(who: Principal): Promise<{ runs: GcRunView[] }> {
      demandSuperuser(who);
      return { runs: (await recentGcRuns(sql, RECENT_RUNS)).map(toView) };
    },

    async get(who: Principal, id: string): Promise<GcRunView> {
      demandSuperuser(who);
      const row = await findGcRun(sql, id);
      if (!row) throw notFound(`collection run ${id}`);
      return toView(row);
    },
  };
}
export type GcAdminService = ReturnType<typeof gcAdminService>;
