// The query of the stored series that are not cache traffic (docs/metrics.md, "Stored metrics"):
// a worker's samples, the instance window, a project's evaluations and builds. `from` and `to` are
// RFC 3339 instants; each route has its own default window and longest one.
import { z } from 'zod';
import { Instant } from './cacheMetrics.js';

export const MetricsWindowQuery = z.strictObject({
  from: Instant.optional(),
  to: Instant.optional(),
});
export type MetricsWindowQuery = z.infer<typeof MetricsWindowQuery>;

/** A project's series: `period` is the bucket of its points (hour or day). */
export const ProjectMetricsQuery = MetricsWindowQuery.extend({
  period: z.enum(['hour', 'day']).optional(),
});
export type ProjectMetricsQuery = z.infer<typeof ProjectMetricsQuery>;
