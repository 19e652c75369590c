// The handshake: hello (worker) → challenge (server) → auth (worker) → welcome | reject (server).
// Then heartbeats, and `reject` from either side to end the connection with a reason.
import { z } from 'zod';
import { MAX_CHALLENGE_PROJECTS, MAX_NAR_CHUNK_BYTES, MAX_TOKENS_PER_PROJECT, MIN_NAR_CHUNK_BYTES, PROTOCOL_VERSION } from './limits.js';
import { ByteCount, Bytes, Seconds, SystemFeature, SystemType } from './fields.js';
import { BuildReading } from './jobMessages.js';
import { REJECT_CODES, type RejectCode } from './rejectCodes.js';

const v = z.literal(PROTOCOL_VERSION);

export const WorkerCapabilities = z.strictObject({
  eval: z.boolean(),
  build: z.boolean(),
  fetch: z.boolean(),
  federate: z.boolean(),
});
export type WorkerCapabilities = z.infer<typeof WorkerCapabilities>;

/** Worker → server, first. Everything the scheduler needs to place jobs on this worker. */
export const Hello = z.strictObject({
  v,
  t: z.literal('hello'),
  workerId: z.uuid(),
  /** kiln's version on the worker, for the operator's eyes */
  software: z.string().max(100),
  capabilities: WorkerCapabilities,
  architectures: z.array(SystemType).min(1).max(32),
  systemFeatures: z.array(SystemFeature).max(256),
  maxConcurrentBuilds: z.int().min(1).max(100_000),
  maxConcurrentEvals: z.int().min(1).max(10_000),
  cpuCores: z.int().min(1).max(100_000),
  /** single-core speed score (worker.system.cpuCoreScore); null when not measured */
  cpuCoreScore: z.int().min(1).nullable(),
  memoryBytes: ByteCount,
  zone: z.string().min(1).max(100).nullable(),
  /** worker.endpoint: where other members of a cluster job reach this worker, passed verbatim in the roster; absent when not set */
  endpoint: z.string().min(1).max(500).optional(),
  /** true when the worker has no peers file and asks to be accepted without a token */
  open: z.boolean(),
});
export type Hello = z.infer<typeof Hello>;

/** Server → worker: the projects that registered this worker (or any worker), and a fresh nonce. */
export const Challenge = z.strictObject({
  v,
  t: z.literal('challenge'),
  nonce: Bytes.refine((b) => b.length === 32, { message: 'the nonce is 32 bytes' }),
  projects: z.array(z.uuid()).max(MAX_CHALLENGE_PROJECTS),
});
export type Challenge = z.infer<typeof Challenge>;

export const ProjectToken = z.strictObject({
  project: z.uuid(),
  /** the peer token itself (base64url of 48 random bytes); see docs/proto.md for why it is sent whole */
  token: z.string().min(16).max(256),
});
export type ProjectToken = z.infer<typeof ProjectToken>;

/** Worker → server: tokens for the challenged projects it holds one for; none in open mode. */
export const Auth = z.strictObject({
  v,
  t: z.literal('auth'),
  /** the challenge's nonce, echoed: an `auth` answers exactly one challenge */
  nonce: Bytes,
  tokens: z.array(ProjectToken).max(MAX_CHALLENGE_PROJECTS * MAX_TOKENS_PER_PROJECT),
});
export type Auth = z.infer<typeof Auth>;

/** Limits the server sets for this connection; the worker follows them. */
export const ProtoLimits = z.strictObject({
  maxMessageBytes: z.int().min(64 * 1024).max(64 * 1024 * 1024),
  heartbeatIntervalSecs: z.int().min(1).max(3600),
  /** 0: the server never declares the worker dead */
  heartbeatTimeoutSecs: Seconds,
  narChunkBytes: z.int().min(MIN_NAR_CHUNK_BYTES).max(MAX_NAR_CHUNK_BYTES),
  narSendChunkTimeoutSecs: z.int().min(1).max(3600),
});
export type ProtoLimits = z.infer<typeof ProtoLimits>;

/** Server → worker: accepted, for these projects. */
export const Welcome = z.strictObject({
  v,
  t: z.literal('welcome'),
  projects: z.array(z.uuid()).max(MAX_CHALLENGE_PROJECTS),
  /** accepted in open mode (no token) */
  open: z.boolean(),
  software: z.string().max(100),
  limits: ProtoLimits,
});
export type Welcome = z.infer<typeof Welcome>;

/** Either side, just before it closes: why. */
export const Reject = z.strictObject({
  v,
  t: z.literal('reject'),
  code: z.enum(Object.keys(REJECT_CODES) as [RejectCode, ...RejectCode[]]),
  reason: z.string().max(1000),
});
export type Reject = z.infer<typeof Reject>;

export const LoadMetrics = z.strictObject({
  runningBuilds: z.int().min(0),
  runningEvals: z.int().min(0),
  /** one-minute load average */
  load1: z.number().min(0),
  memoryFreeBytes: ByteCount,
  memoryTotalBytes: ByteCount,
  /** free bytes on the filesystem of the Nix store; null when unknown */
  storeFreeBytes: ByteCount.nullable(),
});
export type LoadMetrics = z.infer<typeof LoadMetrics>;

/** Worker → server every heartbeatIntervalSecs; `builds`: readings of the running builds that have a cgroup. */
export const Heartbeat = z.strictObject({ v, t: z.literal('heartbeat'), seq: z.int().min(0), load: LoadMetrics, builds: z.array(BuildReading).max(1024).optional() });
export type Heartbeat = z.infer<typeof Heartbeat>;

/** Server → worker for each heartbeat, so a worker notices a server lost without a TCP close. */
export const HeartbeatAck = z.strictObject({ v, t: z.literal('heartbeatAck'), seq: z.int().min(0) });
export type HeartbeatAck = z.infer<typeof HeartbeatAck>;

/** Either side: a problem with one message that does not end the connection (an unknown job id). */
export const ProtoError = z.strictObject({
  v,
  t: z.literal('error'),
  code: z.string().regex(/^[a-z_]{1,64}$/),
  message: z.string().max(4096),
  jobId: z.string().max(128).optional(),
});
export type ProtoError = z.infer<typeof ProtoError>;
