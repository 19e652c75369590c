// The window of a rolled-up series (cache traffic, job phases, worker and instance rollups;
// docs/metrics.md): `period` defaults to hours, `to` to now, `from` to a chart's worth of periods
// before `to`; at most CACHE_METRICS_MAX_POINTS periods, so a wider window asks for a coarser period.
import { ApiError, CACHE_METRICS_MAX_POINTS, type PeriodWindowQuery } from '../../protocol/index.js';

export type MetricsPeriod = NonNullable<PeriodWindowQuery['period']>;

export const PERIOD_MS: Record<MetricsPeriod, number> = { minute: 60_000, hour: 3_600_000, day: 86_400_000, week: 7 * 86_400_000 };
/** The window when the query names no `from`: enough points for a chart of the period. */
const DEFAULT_POINTS: Record<MetricsPeriod, number> = { minute: 60, hour: 48, day: 60, week: 52 };

export function periodWindow(query: PeriodWindowQuery, now: Date): { period: MetricsPeriod; from: Date; to: Date } {
  const period = query.period ?? 'hour';
  const to = query.to === undefined ? now : new Date(query.to);
  const from = query.from === undefined ? new Date(to.getTime() - DEFAULT_POINTS[period] * PERIOD_MS[period]) : new Date(query.from);
  if (from.getTime() >= to.getTime()) throw new ApiError('invalid_query', 'from: must be before to');
  if ((to.getTime() - from.getTime()) / PERIOD_MS[period] > CACHE_METRICS_MAX_POINTS) {
    throw new ApiError('invalid_query', `from: at most ${CACHE_METRICS_MAX_POINTS} ${period}s from to; ask for a longer period`);
  }
  return { period, from, to };
}
