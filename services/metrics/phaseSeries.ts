// GET /metrics/phases (docs/metrics.md, "Stored metrics: job phases"): the instance's dispatch
// latency and run time of evaluations and builds per minute, hour, day or week, read from
// phase_rollups. The samples name no project, so the series is the instance's: superusers only.
import type { PeriodWindowQuery, PhaseMetricsView } from '../../protocol/index.js';
import { phaseSeries, type Sql } from '../../storage/index.js';
import type { Clock } from '../../supervisors/index.js';
import type { Principal } from '../access/index.js';
import { PERIOD_MS, periodWindow } from './periodWindow.js';
import { demandSuperuser } from './superuserOnly.js';

/** Every kind and phase of a period: the answer holds at most this many points per period. */
const SERIES_PER_PERIOD = 4;

export function phaseSeriesService({ sql, clock }: { sql: Sql; clock: Clock }) {
  return {
    async series(who: Principal, query: PeriodWindowQuery): Promise<PhaseMetricsView> {
      demandSuperuser(who, 'the job phase series');
      const { period, from, to } = periodWindow(query, clock.now());
      const periods = Math.ceil((to.getTime() - from.getTime()) / PERIOD_MS[period]) + 1;
      const points = await phaseSeries(sql, period, from, to, periods * SERIES_PER_PERIOD);
      return {
        period, from: from.toISOString(), to: to.toISOString(),
        points: points.map((p) => ({
          start: p.start.toISOString(), kind: p.kind, phase: p.phase, samples: p.samples,
          seconds_avg: p.samples === 0 ? 0 : +(p.totalMs / p.samples / 1000).toFixed(3), seconds_max: p.maxMs / 1000,
        })),
      };
    },
  };
}
export type PhaseSeriesService = ReturnType<typeof phaseSeriesService>;
