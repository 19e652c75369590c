// The query of the stored series that are not cache traffic (docs/metrics.md, "Stored metrics"):
// a worker's samples, the instance window, a project's evaluations and builds. `from` and `to` are
// RFC 3339 instants; each route has its own default window and longest one.
import { z } from 'zod';
import { Instant, MetricsPeriodName } from './cacheMetrics.js';

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

/** The window an answer covers, and whether its samples were cut to the most recent. */
const WindowFields = { from: z.string(), to: z.string(), truncated: z.boolean() };

/** GET /workers/{worker}/samples: what a worker reported, one sample a heartbeat. */
export const WorkerSamplesView = z.strictObject({
  worker: z.string(),
  ...WindowFields,
  samples: z.array(z.strictObject({
    sampled_at: z.string(),
    load1: z.number(),
    memory_free_bytes: z.number(),
    memory_total_bytes: z.number(),
    store_free_bytes: z.number().nullable(),
    build_slots: z.number().int(),
    builds_running: z.number().int(),
    eval_slots: z.number().int(),
    evals_running: z.number().int(),
  })),
});
export type WorkerSamplesView = z.infer<typeof WorkerSamplesView>;

/** GET /metrics/instance: the instance's slots and queues, one sample a minute. */
export const InstanceWindowView = z.strictObject({
  ...WindowFields,
  samples: z.array(z.strictObject({
    sampled_at: z.string(),
    workers_connected: z.number().int(),
    build_slots: z.number().int(),
    builds_running: z.number().int(),
    eval_slots: z.number().int(),
    evals_running: z.number().int(),
    builds_queued: z.number().int(),
    evaluations_queued: z.number().int(),
    evaluations_open: z.number().int(),
  })),
});
export type InstanceWindowView = z.infer<typeof InstanceWindowView>;

/** GET /projects/{org}/{project}/metrics: evaluations and builds per hour or day. */
export const ProjectMetricsView = z.strictObject({
  project: z.string(),
  period: z.enum(['hour', 'day']),
  from: z.string(),
  to: z.string(),
  evaluations: z.array(z.strictObject({
    start: z.string(),
    eval_seconds_avg: z.number().nullable(),
    created: z.number().int(),
    completed: z.number().int(),
    failed: z.number().int(),
    aborted: z.number().int(),
  })),
  builds: z.array(z.strictObject({
    start: z.string(),
    build_seconds_avg: z.number().nullable(),
    build_seconds_max: z.number().nullable(),
    completed: z.number().int(),
    failed: z.number().int(),
  })),
});
export type ProjectMetricsView = z.infer<typeof ProjectMetricsView>;

/** GET /metrics/phases: the instance's job phase timings (dispatch latency, run time) per period. */
export const PhaseMetricsView = z.strictObject({
  period: MetricsPeriodName,
  from: z.string(),
  to: z.string(),
  points: z.array(z.strictObject({
    start: z.string(),
    kind: z.enum(['evaluation', 'build']),
    phase: z.enum(['dispatch', 'run']),
    samples: z.number().int(),
    seconds_avg: z.number(),
    seconds_max: z.number(),
  })),
});
export type PhaseMetricsView = z.infer<typeof PhaseMetricsView>;

/** A rolled-up value over a period: how many samples, their mean, least and largest. */
const RollupPoints = z.array(z.strictObject({
  start: z.string(),
  metric: z.string(),
  samples: z.number().int(),
  avg: z.number(),
  min: z.number(),
  max: z.number(),
}));

/** GET /metrics/instance/rollups: the instance window per minute, hour, day or week. */
export const InstanceRollupsView = z.strictObject({ period: MetricsPeriodName, from: z.string(), to: z.string(), points: RollupPoints });
export type InstanceRollupsView = z.infer<typeof InstanceRollupsView>;

/** GET /workers/{worker}/rollups: a worker's samples per minute, hour, day or week. */
export const WorkerRollupsView = InstanceRollupsView.extend({ worker: z.string() });
export type WorkerRollupsView = z.infer<typeof WorkerRollupsView>;
