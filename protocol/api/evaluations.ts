// Request bodies of the evaluation endpoints (spec: "Projects and tasks", "Evaluations and builds").
import { z } from 'zod';
import { BuildStatus } from '../events/buildEvents.js';
import { ResourceName } from './names.js';

/** a full git commit id: 40 (SHA-1) or 64 (SHA-256) lowercase hex digits */
export const CommitId = z.string().regex(/^([0-9a-f]{40}|[0-9a-f]{64})$/, 'a commit is 40 or 64 lowercase hex digits');

/**
 * What started an evaluation (docs/git-hosts.md): a request (manual), a push to a branch, a pull
 * request, or a poll that saw a branch head move.
 */
export const EvaluationTrigger = z.enum(['manual', 'push', 'pull_request', 'poll']);
export type EvaluationTrigger = z.infer<typeof EvaluationTrigger>;

/** POST /tasks/{project}/{task}/evaluate: without commit, the head of the task's branch; without attr, the task's wildcard */
export const EvaluateTaskBody = z.object({
  commit: CommitId.optional(),
  attr: z.string().min(1).max(1000).optional(),
});
export type EvaluateTaskBody = z.infer<typeof EvaluateTaskBody>;

/** POST /build-requests/source/{id}/evaluate (`kiln build`): without task, the project's task "upload"; without attr, the task's wildcard, else the project's */
export const EvaluateSourceBody = z.object({
  task: ResourceName.optional(),
  attr: z.string().min(1).max(1000).optional(),
});
export type EvaluateSourceBody = z.infer<typeof EvaluateSourceBody>;

/**
 * POST /evals/{id}. abort: stop it; approve: let an evaluation parked for approval run
 * (docs/git-hosts.md, "Approval"); restart: a finished one again as a new evaluation (kiln
 * extension, docs/builds.md "Restarting").
 */
export const EvaluationActionBody = z.object({ method: z.enum(['abort', 'approve', 'restart']) });
export type EvaluationActionBody = z.infer<typeof EvaluationActionBody>;
/** POST /builds/{id} (kiln extension, docs/builds.md "Aborting or restarting one build") */
export const BuildActionBody = z.object({ method: z.enum(['abort', 'restart']) });
export type BuildActionBody = z.infer<typeof BuildActionBody>;

export const EvaluationId = z.uuid({ message: 'an evaluation id is a UUID' });
export const BuildId = z.uuid({ message: 'a build id is a UUID' });

// Response views (docs/builds.md): what GET /evals/{id}, /evals/{id}/builds, /builds/{id},
// /builds/{id}/downloads and the closure routes answer. Dates are ISO strings on the wire.
const Timestamp = z.iso.datetime({ offset: true });

const Count = z.number().int();

/** The most called functions (file relative to the flake, a store path, or null when withheld) and primops, most first. */
const HotspotsView = z.strictObject({
  functions: z.array(z.strictObject({ name: z.string().nullable(), file: z.string().nullable(), line: Count, count: Count })),
  primops: z.array(z.strictObject({ name: z.string(), count: Count })),
});
/** The evaluated flake's flake.lock: nodes (locked sources) and edges (`from`'s input `input` is `to`). */
const FlakeGraphView = z.strictObject({
  root: z.string(),
  nodes: z.array(z.strictObject({
    id: z.string(), type: z.string().nullable(), source: z.string().nullable(), rev: z.string().nullable(), last_modified: Count.nullable(),
  })),
  edges: z.array(z.strictObject({ from: z.string(), to: z.string(), input: z.string() })),
  truncated: z.boolean(),
});

/**
 * GET /evals/{id}'s `statistics` (docs/metrics.md): the evaluation job's time and the evaluator's
 * counters (worker.eval.metrics); hotspots and flake_graph are absent for evaluations recorded
 * before kiln collected them.
 */
export const EvaluationStatistics = z.strictObject({
  wall_seconds: z.number().nullable(),
  evaluator: z.strictObject({
    runs: Count, cpu_seconds: z.number(), thunks: Count, function_calls: Count, primop_calls: Count, values: Count, lookups: Count,
    allocated_bytes: Count, peak_heap_bytes: Count, hotspots: HotspotsView.optional(), flake_graph: FlakeGraphView.optional(),
  }).nullable(),
});
export type EvaluationStatistics = z.infer<typeof EvaluationStatistics>;

/** GET /builds/{id}'s `resources`: the latest attempt's sample; a counter the worker did not measure is null (worker.build.metrics). */
export const BuildResourcesView = z.strictObject({
  attempt: Count,
  /** true: the attempt is still running and these are its counters so far (heartbeats) */
  running: z.boolean(),
  wall_seconds: z.number(),
  cpu_user_seconds: z.number().nullable(),
  cpu_system_seconds: z.number().nullable(),
  peak_memory_bytes: Count.nullable(),
  io_read_bytes: Count.nullable(),
  io_write_bytes: Count.nullable(),
  oom_kills: Count.nullable(),
});
export type BuildResourcesView = z.infer<typeof BuildResourcesView>;

/** GET /evals/{id} */
export const EvaluationView = z.strictObject({
  id: z.uuid(),
  /** `<org>/<project>` */
  project: z.string(),
  task: z.string(),
  commit: z.string().nullable(),
  attr: z.string(),
  trigger: EvaluationTrigger,
  /** the branch of a push or poll evaluation */
  branch: z.string().nullable(),
  /** the number of a pull request evaluation */
  pull_request: z.number().int().nullable(),
  phase: z.string(),
  error: z.string().nullable(),
  attempts: z.number().int(),
  worker: z.string().nullable(),
  created_at: Timestamp,
  started_at: Timestamp.nullable(),
  finished_at: Timestamp.nullable(),
  builds: z.strictObject({
    total: z.number().int(), queued: z.number().int(), started: z.number().int(), completed: z.number().int(),
    failed: z.number().int(), substituted: z.number().int(), aborted: z.number().int(),
  }),
  /** GET /evals/{id} only */
  statistics: EvaluationStatistics.optional(),
});
export type EvaluationView = z.infer<typeof EvaluationView>;

/** GET /evals/{id}/builds (each), GET /builds/{id}, GET /builds/{id}/dependencies (each) */
export const BuildView = z.strictObject({
  build_id: z.uuid(),
  /** the shared build of the derivation, which worker.job_dispatched names */
  derivation_build: z.uuid(),
  evaluation_id: z.uuid(),
  drv_path: z.string(),
  name: z.string(),
  system: z.string(),
  status: z.string(),
  failure: z.strictObject({ class: z.string(), reason: z.string().nullable(), message: z.string().nullable() }).nullable(),
  attempts: z.number().int(),
  entry_point: z.boolean(),
  attr: z.string().nullable(),
  /** output name → store path */
  outputs: z.record(z.string(), z.string().nullable()),
  worker: z.string().nullable(),
  log_bytes: z.number().int(),
  queued_at: Timestamp,
  started_at: Timestamp.nullable(),
  finished_at: Timestamp.nullable(),
  /** GET /builds/{id} only: null before a worker reported a sample */
  resources: BuildResourcesView.nullable().optional(),
});
export type BuildView = z.infer<typeof BuildView>;

/**
 * GET /projects/{org}/{project}/entry-points, GET /tasks/{project}/{task}/entry-points (each): a root
 * build of the latest evaluation; build_status completed means built and in the cache.
 */
export const EntryPointView = BuildView.pick({ build_id: true, derivation_build: true, evaluation_id: true, attr: true, drv_path: true, outputs: true })
  .extend({ build_status: z.string() });
export type EntryPointView = z.infer<typeof EntryPointView>;

/**
 * GET /evals/{id}/builds/page?page=&per_page=&status=&search=: the builds a page at a time, in
 * `drv_path` order (as GET /evals/{id}/builds), for a client that shows the first rows before the
 * rest arrive. 50 a page by default, at most 500 (a virtualised table fetches the rows in view).
 */
export const EvaluationBuildsQuery = z.strictObject({
  page: z.coerce.number().int().min(1).max(1_000_000).default(1),
  per_page: z.coerce.number().int().min(1).max(500).default(50),
  /** only builds in this status */
  status: BuildStatus.optional(),
  /** only builds whose name or attribute holds this text, case-insensitively */
  search: z.string().max(200, 'search is at most 200 characters').optional(),
});
export type EvaluationBuildsQuery = z.infer<typeof EvaluationBuildsQuery>;

const StatusCounts = z.strictObject({
  total: z.number().int(), queued: z.number().int(), started: z.number().int(), completed: z.number().int(),
  failed: z.number().int(), substituted: z.number().int(), aborted: z.number().int(),
});

export const EvaluationBuildsPage = z.strictObject({
  builds: z.array(BuildView),
  page: z.number().int(),
  per_page: z.number().int(),
  /** builds that match status and search: the length of the whole list this page is part of */
  total: z.number().int(),
  /** builds per status that match search (status not applied), for a filter's labels */
  counts: StatusCounts,
});
export type EvaluationBuildsPage = z.infer<typeof EvaluationBuildsPage>;

/** GET /builds/{id}/downloads (each): a file named by the output's nix-support/hydra-build-products */
export const BuildProductView = z.strictObject({
  filename: z.string(),
  type: z.string(),
  subtype: z.string(),
  path: z.string(),
  output: z.string(),
  size: z.number().int(),
  executable: z.boolean(),
});
export type BuildProductView = z.infer<typeof BuildProductView>;

/** GET /builds/{id}/closure, /runtime-closure, /evals/{id}/closure, /runtime-closure */
export const ClosureGraphView = z.strictObject({
  roots: z.array(z.string()),
  /** of the whole closure, even when the node list was cut */
  total_size_bytes: z.number().int(),
  node_count: z.number().int(),
  edge_count: z.number().int(),
  /** the largest 500 nodes by closure size are listed; the rest are not */
  truncated: z.boolean(),
  nodes: z.array(z.strictObject({
    id: z.string(), name: z.string(), path: z.string(),
    /** null when nothing of it is cached */
    nar_size: z.number().int().nullable(),
    closure_size: z.number().int(),
  })),
  /** target depends on source */
  edges: z.array(z.strictObject({ source: z.string(), target: z.string() })),
});
export type ClosureGraphView = z.infer<typeof ClosureGraphView>;

/** GET /builds/{id}/graph: the build and the builds it waits for, as a graph of this evaluation's builds. */
export const BuildGraphView = z.strictObject({
  root: z.uuid(),
  nodes: z.array(z.strictObject({
    build_id: z.uuid(),
    derivation_build: z.uuid(),
    drv_path: z.string(),
    name: z.string(),
    system: z.string(),
    status: z.string(),
  })),
  /** build ids; target depends on source (as in ClosureGraphView) */
  edges: z.array(z.strictObject({ source: z.string(), target: z.string() })),
});
export type BuildGraphView = z.infer<typeof BuildGraphView>;

/** GET /tasks/{project}/{task}/evaluations?commit=&attr=: the attribute's build at that commit. */
export const AttributeAtCommitView = EntryPointView.extend({ commit: z.string() });
export type AttributeAtCommitView = z.infer<typeof AttributeAtCommitView>;
