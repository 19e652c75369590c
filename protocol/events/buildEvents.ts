// Builds, evaluations and the derivation graph (spec: Events). Build events carry build_id,
// derivation_build, evaluation_id, status, task and project; derivation_build is the shared build
// that worker.job_dispatched names as its build_id.
import { z } from 'zod';
import { Bytes, Count, ProjectLabel, StorePath, TaskName, Uuid, durableEvent, transientEvent, type Defined } from './eventFields.js';

// aborted (a kiln extension): running when its evaluation was aborted, its job cancelled (docs/builds.md)
export const buildStatuses = ['queued', 'started', 'completed', 'failed', 'substituted', 'aborted'] as const;
export const BuildStatus = z.enum(buildStatuses);
export type BuildStatus = z.infer<typeof BuildStatus>;

export const evaluationPhases = [
  'queued', 'waiting', 'approval_granted', 'fetching', 'evaluating', 'building', 'completed', 'failed', 'aborted',
] as const;
export const EvaluationPhase = z.enum(evaluationPhases);
export type EvaluationPhase = z.infer<typeof EvaluationPhase>;

export const BuildFailure = z.enum(['FailedPermanent', 'FailedTransient', 'FailedTimeout']);

const buildIdentity = {
  build_id: Uuid,
  derivation_build: Uuid,
  evaluation_id: Uuid,
  status: BuildStatus,
  task: TaskName,
  project: ProjectLabel,
};

export const BuildContent = z.looseObject({
  ...buildIdentity,
  /** a root build of its evaluation; build.<status> is durable only when true (DESIGN: Durability) */
  entry_point: z.boolean(),
  attr: z.string().max(1000).optional(),
  drv_path: StorePath.optional(),
  failure: BuildFailure.optional(),
  attempt: Count.optional(),
  worker: Uuid.optional(),
});

export const BuildStatusChangedContent = z.looseObject({
  ...buildIdentity,
  previous: BuildStatus.nullable().optional(),
  entry_point: z.boolean().optional(),
  failure: BuildFailure.optional(),
  worker: Uuid.optional(),
});

export const BuildProgressContent = z.looseObject({
  ...buildIdentity,
  /** what the transfer is: inputs substituted to the worker, outputs uploaded to a cache */
  phase: z.enum(['downloading', 'building', 'uploading']),
  bytes: Bytes,
  total_bytes: Bytes.optional(),
  paths: Count,
  total_paths: Count.optional(),
});

const evaluationIdentity = { evaluation_id: Uuid, project: ProjectLabel, task: TaskName };

export const EvaluationContent = z.looseObject({
  ...evaluationIdentity,
  phase: EvaluationPhase,
  commit: z.string().max(64).optional(),
  attr: z.string().max(1000).optional(),
  /** why it failed, waits or was aborted, in words */
  reason: z.string().max(4000).optional(),
});

export const EvaluationProgressContent = z.looseObject({
  ...evaluationIdentity,
  phase: EvaluationPhase,
  derivations: Count.optional(),
  builds_total: Count,
  builds_done: Count,
  builds_failed: Count,
  builds_substituted: Count.optional(),
});

export const EvaluationActivityContent = z.looseObject({
  ...evaluationIdentity,
  /** fetch, eval or log */
  kind: z.string().min(1).max(32),
  message: z.string().max(16_384),
});

const GraphContent = z.looseObject({
  evaluation_id: Uuid.optional(),
  project: ProjectLabel.optional(),
  derivations: Count,
  new_derivations: Count.optional(),
  reason: z.string().max(1000).optional(),
});

type BuildDefinitions = { [S in BuildStatus as `build.${S}`]: Defined<typeof BuildContent> };
type EvaluationDefinitions = { [P in EvaluationPhase as `evaluation.${P}`]: Defined<typeof EvaluationContent> };

const buildDefinitions = Object.fromEntries(
  buildStatuses.map((s) => [
    `build.${s}`,
    { ...durableEvent('build.<status>', `a build became ${s}; durable for entry points only`, BuildContent), durable: 'entry_points' as const },
  ]),
) as BuildDefinitions;

const evaluationDefinitions = Object.fromEntries(
  evaluationPhases.map((p) => [`evaluation.${p}`, durableEvent('evaluation.<phase>', `an evaluation entered the phase ${p}`, EvaluationContent)]),
) as EvaluationDefinitions;

export const buildEventDefinitions = {
  ...buildDefinitions,
  ...evaluationDefinitions,
  'build.status_changed': transientEvent('build', 'every build job transition, entry point or not', BuildStatusChangedContent),
  'build.progress': transientEvent('build', 'transfer progress of a build (phase, bytes, paths)', BuildProgressContent),
  'evaluation.progress': transientEvent('evaluation', 'counts of an evaluation\'s builds', EvaluationProgressContent),
  'evaluation.activity': transientEvent('evaluation', 'what an evaluation is doing now: fetch and evaluation messages', EvaluationActivityContent),
  'graph.recorded': transientEvent('graph', 'an evaluation\'s derivation graph was recorded', GraphContent),
  'graph.demoted': transientEvent('graph', 'derivations were demoted from the graph', GraphContent),
  'graph.collected': transientEvent('graph', 'unreferenced derivations were collected', GraphContent),
};
