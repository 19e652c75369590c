// Every /proto message, one discriminated union on `t`, and who may send which.
import { z } from 'zod';
import { Auth, Challenge, Heartbeat, HeartbeatAck, Hello, ProtoError, Reject, Welcome } from './handshakeMessages.js';
import {
  BuildJob, BuildLog, BuildResult, CancelJob, ChangeJob, ChangeResult, EvalActivity, EvalBatch, EvalCredit, EvalJob, EvalResult, JobAccepted, JobFailed, JobRefused, PushJob, PushResult,
} from './jobMessages.js';
import { NarAbort, NarChunk, NarCredit, NarPushAck, NarPushEnd, NarPushStart } from './narMessages.js';

export const Message = z.discriminatedUnion('t', [
  Hello, Challenge, Auth, Welcome, Reject, Heartbeat, HeartbeatAck, ProtoError,
  EvalJob, BuildJob, PushJob, ChangeJob, CancelJob, EvalCredit, JobAccepted, JobRefused, EvalBatch, EvalActivity, EvalResult, BuildLog, BuildResult, PushResult, ChangeResult, JobFailed,
  NarPushStart, NarCredit, NarChunk, NarPushEnd, NarPushAck, NarAbort,
]);
export type Message = z.infer<typeof Message>;
export type MessageType = Message['t'];
export type MessageOf<T extends MessageType> = Extract<Message, { t: T }>;

/** A message without its version field, as code builds it; encodeMessage adds `v`. */
export type Outgoing<T extends MessageType = MessageType> = T extends MessageType ? Omit<MessageOf<T>, 'v'> : never;

export const MESSAGE_TYPES = Message.options.map((o) => o.shape.t.value) as MessageType[];

/** Messages only a worker sends. */
export const WORKER_MESSAGES: ReadonlySet<MessageType> = new Set<MessageType>([
  'hello', 'auth', 'heartbeat', 'jobAccepted', 'jobRefused', 'evalBatch', 'evalActivity', 'evalResult', 'buildLog', 'buildResult', 'pushResult', 'changeResult',
  'jobFailed', 'narPushStart', 'narChunk', 'narPushEnd',
]);
/** Messages only a server sends. */
export const SERVER_MESSAGES: ReadonlySet<MessageType> = new Set<MessageType>([
  'challenge', 'welcome', 'heartbeatAck', 'evalJob', 'buildJob', 'pushJob', 'changeJob', 'cancelJob', 'evalCredit', 'narCredit', 'narPushAck',
]);
// reject, error and narAbort go both ways.

export const isWorkerMessage = (t: MessageType): boolean => !SERVER_MESSAGES.has(t);
export const isServerMessage = (t: MessageType): boolean => !WORKER_MESSAGES.has(t);
