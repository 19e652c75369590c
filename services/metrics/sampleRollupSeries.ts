// GET /metrics/instance/rollups and GET /workers/{worker}/rollups (docs/metrics.md, "Stored
// metrics: worker and instance rollups"): the rolled-up instance window (superusers only) and a
// worker's rolled-up samples, read by the same rule as its raw samples: a superuser, every
// connection; anyone else, the connections made for a project where they hold manageWorkers.
import type { InstanceRollupsView, PeriodWindowQuery, WorkerRollupsView } from '../../protocol/index.js';
import { INSTANCE_METRICS, NO_ID, sampleRollupSeries, WORKER_METRICS, type SampleRollupPoint, type Sql } from '../../storage/index.js';
import type { Clock } from '../../supervisors/index.js';
import { isUuid, notFound, type Principal } from '../access/index.js';
import { PERIOD_MS, periodWindow } from './periodWindow.js';
import { demandSuperuser } from './superuserOnly.js';
import { readableProjects } from './workerSampleSeries.js';

const pointView = (p: SampleRollupPoint) => ({
  start: p.start.toISOString(), metric: p.metric, samples: p.samples, avg: +(p.total / p.samples).toFixed(4), min: p.least, max: p.greatest,
});

export function sampleRollupSeriesService({ sql, clock }: { sql: Sql; clock: Clock }) {
  const read = async (query: PeriodWindowQuery, series: { source: 'worker' | 'instance'; workerId: string; connections: string[] | null; metrics: number }) => {
    const { period, from, to } = periodWindow(query, clock.now());
    const periods = Math.ceil((to.getTime() - from.getTime()) / PERIOD_MS[period]) + 1;
    const points = await sampleRollupSeries(sql, { ...series, period, from, to, limit: periods * series.metrics });
    return { period, from: from.toISOString(), to: to.toISOString(), points: points.map(pointView) };
  };
  return {
    async instance(who: Principal, query: PeriodWindowQuery): Promise<InstanceRollupsView> {
      demandSuperuser(who, 'the instance window');
      return read(query, { source: 'instance', workerId: NO_ID, connections: null, metrics: INSTANCE_METRICS.length });
    },
    async worker(who: Principal, workerId: string, query: PeriodWindowQuery): Promise<WorkerRollupsView> {
      const projects = await readableProjects(sql, who, workerId);
      if (!isUuid(workerId)) throw notFound(`worker ${workerId}`);
      const connections = projects === null ? null : (await sql<{ id: string }[]>`
        select id from worker_connections where worker_id = ${workerId} and projects && ${projects}::uuid[]`).map((r) => r.id);
      return { worker: workerId, ...await read(query, { source: 'worker', workerId, connections, metrics: WORKER_METRICS.length }) };
    },
  };
}
export type SampleRollupSeriesService = ReturnType<typeof sampleRollupSeriesService>;
