// Jobs: the server sends evalJob, buildJob, pushJob, changeJob and cancelJob; the worker answers
// each job with jobAccepted or jobRefused, then (for an accepted job) exactly one of evalResult,
// buildResult, pushResult, changeResult or jobFailed. Evaluations stream evalBatch messages before their
// evalResult, builds stream buildLog chunks before their buildResult.
import { z } from 'zod';
import { PROTOCOL_VERSION } from './limits.js';
import { ByteCount, Bytes, CommitHash, ContentAddressText, DrvPathText, JobId, NarHashText, Seconds, StorePathText, SystemFeature, SystemType } from './fields.js';
import { JobFailure } from './failureClass.js';

const v = z.literal(PROTOCOL_VERSION);

/** A cache name as the server knows it. */
const CacheName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/, 'a cache name');
const OutputName = z.string().regex(/^[A-Za-z0-9+\-._?=]{1,100}$/, 'an output name such as out or dev');
const AttrName = z.string().max(1000);

/** Evaluate `attributes` (an attribute wildcard, docs/worker.md) of the flake at `repository`@`commit`. */
export const EvalJob = z.strictObject({
  v,
  t: z.literal('evalJob'),
  jobId: JobId,
  /** the project evaluated: the worker keeps one clone per project (<worker.baseDir>/repos/<project>), never one per URL (protocol version 2) */
  project: z.uuid(),
  /** a git URL: https://, ssh://, git://, file:// */
  repository: z.string().min(1).max(2000),
  /** null when `source` names what to evaluate instead */
  commit: CommitHash.nullable(),
  /**
   * An uploaded source tree (`kiln build`, docs/builds.md "Evaluating a source upload") evaluated
   * instead of `repository`@`commit`: a tarball the worker GETs from `url` (a capability URL
   * minted for this job) and checks against `sha256` (hex) before Nix unpacks it.
   */
  source: z.strictObject({
    url: z.url({ protocol: /^https?$/ }).max(2000),
    sha256: z.string().regex(/^[0-9a-f]{64}$/, 'a hex SHA-256'),
  }).optional(),
  /**
   * The shared evaluation cache (docs/eval-cache.md): the worker asks `url`/query, GETs and PUTs
   * `url`/<narHash hex> with `?token=`, valid for this evaluation's organization while it runs.
   * Absent from servers before it; a worker from before it refuses the message (upgrade workers first).
   */
  inputCache: z.strictObject({
    url: z.url({ protocol: /^https?$/ }).max(2000),
    token: z.string().regex(/^[A-Za-z0-9_-]{20,200}$/, 'a base64url token'),
  }).optional(),
  /** the project's attribute wildcard, e.g. `packages.x86_64-linux.*, !packages.x86_64-linux.big` */
  attributes: z.string().min(1).max(4000),
  /** 0: no limit */
  timeoutSecs: Seconds,
  /**
   * A private repository of a Git host application (docs/git-hosts.md): fetch `repository` with this
   * installation token (read-only, this repository only, valid for at most an hour) and connect only
   * to the addresses the server checked. Never logged nor written to disk by either side.
   */
  access: z.strictObject({
    token: z.string().regex(/^[\x21-\x7e]{1,500}$/, 'a token of visible ASCII characters'),
    /** curl's resolve entry `host:port:addr[,addr…]` (git's http.curloptResolve; a leading - or + would mean something else to curl); null for an IP literal */
    resolve: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9.-]*:\d{1,5}:[0-9A-Fa-f.:,[\]]+$/, 'host:port:addresses').max(1000).nullable(),
  }).optional(),
});
export type EvalJob = z.infer<typeof EvalJob>;
export type RepositoryAccess = NonNullable<EvalJob['access']>;

export const Substituter = z.strictObject({
  /** a binary cache URL Nix understands (https://host/cache/main) */
  url: z.string().min(1).max(2000),
  /** its signing keys, `name:base64` */
  publicKeys: z.array(z.string().max(200)).max(8),
  /** a private cache's read token, the HTTP Basic password for this job's duration (a netrc entry for the URL's host) */
  password: z.string().min(1).max(2000).optional(),
});
export type Substituter = z.infer<typeof Substituter>;

/** Build one derivation; push its outputs' closure to `targetCaches`. */
export const BuildJob = z.strictObject({
  v,
  t: z.literal('buildJob'),
  jobId: JobId,
  drvPath: DrvPathText,
  /** where missing inputs (and the .drv itself) may be substituted from */
  substituters: z.array(Substituter).max(16),
  targetCaches: z.array(CacheName).max(64),
  /** total build time limit; 0: none (build.defaultTimeoutSecs or the derivation's own, chosen by the server) */
  timeoutSecs: Seconds,
  /** silence limit; 0: none */
  maxSilentSecs: Seconds,
  /**
   * A cluster job (docs/builds.md, "Cluster jobs"): every member gets this message with its rank;
   * rank 0 builds the derivation, the others accept and hold their slot until a cancelJob ends the
   * job. `roster` lists every member in rank order with the endpoint it advertised (worker.endpoint).
   */
  cluster: z.strictObject({
    id: z.uuid(),
    rank: z.int().min(0).max(63),
    roster: z.array(z.strictObject({ workerId: z.uuid(), endpoint: z.string().min(1).max(500).nullable() })).min(2).max(64),
  }).optional(),
});
export type BuildJob = z.infer<typeof BuildJob>;
export type ClusterRoster = NonNullable<BuildJob['cluster']>['roster'];

const RepositoryAccessField = EvalJob.shape.access.unwrap();

/**
 * The open_pr task action's change (docs/git-hosts.md, "open_pr"): fetch `commit` of `repository`
 * into the project's clone as an evalJob does, run `command` (an argv, no shell, without any
 * token) in a scratch clone at it, commit what changed as `author` and force-push it to `branch`
 * of `pushTo` with `pushAccess` (a token that may write this repository's contents, nothing else).
 */
export const ChangeJob = z.strictObject({
  v,
  t: z.literal('changeJob'),
  jobId: JobId,
  project: z.uuid(),
  repository: z.string().min(1).max(2000),
  commit: CommitHash,
  access: RepositoryAccessField.optional(),
  command: z.array(z.string().min(1).max(1000).regex(/^[^\0]*$/)).min(1).max(64),
  /** the host's clone URL of the repository the pull request is opened in */
  pushTo: z.string().min(1).max(2000),
  pushAccess: RepositoryAccessField,
  branch: z.string().regex(/^[A-Za-z0-9_][A-Za-z0-9._/+-]{0,199}$/, 'a branch name'),
  /** null: the worker's own git identity */
  author: z.strictObject({ name: z.string().min(1).max(200).nullable(), email: z.string().min(3).max(254).nullable() }),
  message: z.string().min(1).max(10_000),
});
export type ChangeJob = z.infer<typeof ChangeJob>;

/** Push store paths this worker already has (an evaluation's .drv files and sources, say). */
export const PushJob = z.strictObject({
  v,
  t: z.literal('pushJob'),
  jobId: JobId,
  paths: z.array(StorePathText).min(1).max(100_000),
  targetCaches: z.array(CacheName).min(1).max(64),
});
export type PushJob = z.infer<typeof PushJob>;

export const CancelJob = z.strictObject({ v, t: z.literal('cancelJob'), jobId: JobId, reason: z.string().max(1000) });
export type CancelJob = z.infer<typeof CancelJob>;

/** Server → worker: the evaluation may send `batches` more evalBatch messages (beyond EVAL_BATCH_WINDOW at the start). */
export const EvalCredit = z.strictObject({ v, t: z.literal('evalCredit'), jobId: JobId, batches: z.int().min(1).max(1024) });
export type EvalCredit = z.infer<typeof EvalCredit>;

export const JobAccepted = z.strictObject({ v, t: z.literal('jobAccepted'), jobId: JobId });
export type JobAccepted = z.infer<typeof JobAccepted>;

export const JobRefusal = z.enum(['busy', 'unsupported', 'duplicate']);
export const JobRefused = z.strictObject({ v, t: z.literal('jobRefused'), jobId: JobId, refusal: JobRefusal, message: z.string().max(4096) });
export type JobRefused = z.infer<typeof JobRefused>;

/** One derivation of the evaluated closure, as `nix show-derivation` describes it. */
export const DerivationNode = z.strictObject({
  drvPath: DrvPathText,
  /** the derivation's name attribute */
  name: z.string().max(1000),
  /** output name → store path; null for an output whose path is not known before the build (content-addressed) */
  outputs: z.record(OutputName, StorePathText.nullable()),
  /** input derivation → the outputs of it this one uses */
  inputDrvs: z.record(DrvPathText, z.array(OutputName).max(1000)),
  inputSrcs: z.array(StorePathText).max(100_000),
  system: SystemType,
  requiredSystemFeatures: z.array(SystemFeature).max(64),
  /** the derivation's own `timeout` / `maxSilent`, which override the server defaults */
  timeoutSecs: Seconds.nullable(),
  maxSilentSecs: Seconds.nullable(),
  preferLocalBuild: z.boolean(),
  /** a fixed-output derivation (a download): its output hash is declared up front */
  fixedOutput: z.boolean(),
});
export type DerivationNode = z.infer<typeof DerivationNode>;

export const EvaluatedAttribute = z.strictObject({
  /** the attribute path, one element per name: ["packages", "x86_64-linux", "hello"] */
  path: z.array(AttrName).min(1).max(100),
  drvPath: DrvPathText,
  outputs: z.record(OutputName, StorePathText.nullable()),
});
export type EvaluatedAttribute = z.infer<typeof EvaluatedAttribute>;

export const AttributeError = z.strictObject({
  path: z.array(AttrName).min(1).max(100),
  message: z.string().max(16 * 1024),
});
export type AttributeError = z.infer<typeof AttributeError>;

/**
 * Part of an evaluation's result. Derivations come in dependency order (a derivation after all
 * of its inputs), across batches too; attributes after every derivation they name.
 */
export const EvalBatch = z.strictObject({
  v,
  t: z.literal('evalBatch'),
  jobId: JobId,
  derivations: z.array(DerivationNode).max(100_000),
  attributes: z.array(EvaluatedAttribute).max(100_000),
  errors: z.array(AttributeError).max(100_000),
});
export type EvalBatch = z.infer<typeof EvalBatch>;

/** A function the evaluator called often (NIX_COUNT_CALLS); file relative to the flake's source, null when withheld. */
const FunctionHotspot = z.strictObject({
  name: z.string().max(256).nullable(),
  file: z.string().max(1024).nullable(),
  line: z.int().min(0),
  count: z.int().min(0),
});
const PrimOpHotspot = z.strictObject({ name: z.string().max(256), count: z.int().min(0) });
/** The most called functions and primops of an evaluation, counts summed over its runs, most first. */
export const EvalHotspots = z.strictObject({
  functions: z.array(FunctionHotspot).max(20),
  primOps: z.array(PrimOpHotspot).max(10),
});
export type EvalHotspots = z.infer<typeof EvalHotspots>;

const LockNodeId = z.string().max(256);
/** One node of flake.lock: its source as `owner/repo` (github, gitlab, sourcehut), url or store path. */
const FlakeGraphNode = z.strictObject({
  id: LockNodeId,
  type: z.string().max(64).nullable(),
  source: z.string().max(1024).nullable(),
  rev: z.string().max(128).nullable(),
  lastModified: z.int().min(0).nullable(),
});
/** `from`'s input named `input` is the node `to` (a `follows` resolved). */
const FlakeGraphEdge = z.strictObject({ from: LockNodeId, to: LockNodeId, input: z.string().max(256) });
export const FLAKE_GRAPH_MAX_NODES = 500;
export const FLAKE_GRAPH_MAX_EDGES = 2000;
/** The evaluated flake's inputs from its flake.lock; truncated when the lock has more than the bounds. */
export const FlakeGraph = z.strictObject({
  root: LockNodeId,
  nodes: z.array(FlakeGraphNode).max(FLAKE_GRAPH_MAX_NODES),
  edges: z.array(FlakeGraphEdge).max(FLAKE_GRAPH_MAX_EDGES),
  truncated: z.boolean(),
});
export type FlakeGraph = z.infer<typeof FlakeGraph>;

/**
 * The evaluator's statistics (NIX_SHOW_STATS) of an evaluation, summed over its `nix eval` runs
 * (worker.eval.metrics); the heap is the largest any run reached.
 */
export const EvalStats = z.strictObject({
  runs: z.int().min(0),
  cpuSeconds: z.number().min(0).max(1e9),
  thunks: z.int().min(0),
  functionCalls: z.int().min(0),
  primOpCalls: z.int().min(0),
  values: z.int().min(0),
  lookups: z.int().min(0),
  /** bytes the evaluator allocated (gc.totalBytes), all runs together */
  allocatedBytes: z.int().min(0),
  /** the largest garbage-collected heap of one run (gc.heapSize) */
  peakHeapBytes: z.int().min(0),
  hotspots: EvalHotspots.optional(),
  flakeGraph: FlakeGraph.optional(),
});
export type EvalStats = z.infer<typeof EvalStats>;

/** What an evaluation is doing now (evaluation.activity): fetching its commit, or evaluating. */
export const EvalActivity = z.strictObject({
  v,
  t: z.literal('evalActivity'),
  jobId: JobId,
  kind: z.enum(['fetch', 'eval']),
  message: z.string().max(4096),
});
export type EvalActivity = z.infer<typeof EvalActivity>;

/**
 * A build's resources from its cgroup (worker.build.metrics, worker.build.cgroup): CPU time always
 * (cgroup v2 counts it without a controller), the rest null when the cgroup has no such file (the
 * memory or io controller is not enabled there).
 */
export const BuildResources = z.strictObject({
  cpuUserSeconds: z.number().min(0).max(1e9),
  cpuSystemSeconds: z.number().min(0).max(1e9),
  peakMemoryBytes: z.int().min(0).nullable(),
  ioReadBytes: z.int().min(0).nullable(),
  ioWriteBytes: z.int().min(0).nullable(),
  oomKills: z.int().min(0).nullable(),
});
export type BuildResources = z.infer<typeof BuildResources>;

/**
 * A running build's counters so far, sent with the heartbeats (worker.build.metrics): the job
 * result's resources plus the memory in use now. At most a heartbeat interval old.
 */
export const BuildReading = BuildResources.extend({
  jobId: JobId,
  wallSeconds: z.number().min(0).max(1e9),
  memoryBytes: z.int().min(0).nullable(),
});
export type BuildReading = z.infer<typeof BuildReading>;

/** The end of a successful evaluation, with totals so the server can tell it missed nothing. */
export const EvalResult = z.strictObject({
  v,
  t: z.literal('evalResult'),
  jobId: JobId,
  /** null for a source upload */
  commit: CommitHash.nullable(),
  derivationCount: z.int().min(0),
  attributeCount: z.int().min(0),
  errorCount: z.int().min(0),
  durationMs: z.int().min(0),
  /** with worker.eval.metrics */
  stats: EvalStats.optional(),
});
export type EvalResult = z.infer<typeof EvalResult>;

/** A piece of a build's log. `droppedBytes`: log bytes withheld since the previous chunk (worker.log.* caps). */
export const BuildLog = z.strictObject({
  v,
  t: z.literal('buildLog'),
  jobId: JobId,
  seq: z.int().min(0),
  data: Bytes.refine((b) => b.length <= 256 * 1024, { message: 'a log chunk is at most 256 KiB' }),
  droppedBytes: ByteCount,
});
export type BuildLog = z.infer<typeof BuildLog>;

/** A store path's metadata, as a narinfo carries it. */
export const PathInfo = z.strictObject({
  path: StorePathText,
  narHash: NarHashText,
  narSize: ByteCount,
  references: z.array(StorePathText).max(100_000),
  deriver: DrvPathText.nullable(),
  ca: ContentAddressText.nullable(),
});
export type PathInfo = z.infer<typeof PathInfo>;

export const BuiltOutput = PathInfo.extend({ name: OutputName });
export type BuiltOutput = z.infer<typeof BuiltOutput>;

export const BuildResult = z.strictObject({
  v,
  t: z.literal('buildResult'),
  jobId: JobId,
  drvPath: DrvPathText,
  outputs: z.array(BuiltOutput).min(1).max(1000),
  /** true when every output was already valid here and nothing was built */
  alreadyValid: z.boolean(),
  durationMs: z.int().min(0),
  logBytes: ByteCount,
  logDroppedBytes: ByteCount,
  /** with worker.build.metrics and a usable worker.build.cgroup */
  resources: BuildResources.optional(),
});
export type BuildResult = z.infer<typeof BuildResult>;

export const PushResult = z.strictObject({
  v,
  t: z.literal('pushResult'),
  jobId: JobId,
  paths: z.array(z.strictObject({ path: StorePathText, status: z.enum(['stored', 'present']) })).max(100_000),
});
export type PushResult = z.infer<typeof PushResult>;

/** A changeJob's end: the commit now at the branch, null when the command changed nothing (nothing pushed). */
export const ChangeResult = z.strictObject({
  v,
  t: z.literal('changeResult'),
  jobId: JobId,
  pushed: CommitHash.nullable(),
  durationMs: z.int().min(0),
});
export type ChangeResult = z.infer<typeof ChangeResult>;

export const JobFailed = z.strictObject({
  v,
  t: z.literal('jobFailed'),
  jobId: JobId,
  failure: JobFailure,
  durationMs: z.int().min(0),
  logBytes: ByteCount,
  logDroppedBytes: ByteCount,
  /** a build that ran (not an evaluation) with worker.build.metrics and a usable worker.build.cgroup */
  resources: BuildResources.optional(),
});
export type JobFailed = z.infer<typeof JobFailed>;
