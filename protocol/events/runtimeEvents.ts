// Workers, the worker protocol, webhook pings, the supervision tree's steps and the live sockets' own
// notices. All live-only except webhook.ping, which goes through the outbox to the one webhook being tested.
import { z } from 'zod';
import { Bytes, CacheLabel, Count, ProjectLabel, Uuid, transientEvent, type Defined } from './eventFields.js';

const Worker = z.looseObject({
  worker: Uuid,
  name: z.string().max(100).optional(),
  zone: z.string().max(100).optional(),
  systems: z.array(z.string().max(64)).max(64).optional(),
  features: z.array(z.string().max(64)).max(256).optional(),
  reason: z.string().max(200).optional(),
});

export const ProtoMessageContent = z.looseObject({
  /** the message type, as in the event name */
  type: z.string().min(1).max(64),
  worker: Uuid.optional(),
  job_id: Uuid.optional(),
  /** encoded size in bytes; the payload itself is never in the event */
  size: Bytes,
});

export const WebhookPingContent = z.looseObject({
  webhook_id: Uuid,
  scope: z.enum(['project', 'cache', 'instance']),
  project: ProjectLabel.optional(),
  cache: CacheLabel.optional(),
  message: z.string().max(200),
});

export const StreamLaggedContent = z.looseObject({ skipped: Count });

export const StreamOpenContent = z.looseObject({
  /** firehose, task, evaluation, build, board, boardCache or actors */
  feed: z.string().max(32),
  /** the firehose's globs */
  events: z.array(z.string()).optional(),
});

/** worker.job_dispatched's content: one per build a dispatch sends, so plainly checked too (fastEventChecks.ts). */
export const JobDispatchedContent = z.looseObject({
  worker: Uuid, job_id: Uuid, kind: z.enum(['build', 'evaluation']), build_id: Uuid.optional(), evaluation_id: Uuid.optional(),
});

export const runtimeEventDefinitions = {
  'worker.connected': transientEvent('worker', 'a worker connected over /proto', Worker),
  'worker.disconnected': transientEvent('worker', 'a worker\'s connection ended', Worker),
  'worker.dead': transientEvent('worker', 'a worker was silent past proto.workerHeartbeatTimeoutSecs; its jobs were re-queued', Worker),
  'worker.job_dispatched': transientEvent('worker', 'a job was sent to a worker; build_id names the derivation_build', JobDispatchedContent),
  'worker.job_finished': transientEvent('worker', 'a worker reported a job\'s end', z.looseObject({
    worker: Uuid, job_id: Uuid, outcome: z.string().max(64),
  })),
  'worker.queue_depth': transientEvent('worker', 'jobs waiting for a worker', z.looseObject({
    queued: Count, by_system: z.record(z.string(), Count).optional(),
  })),
  'webhook.ping': {
    family: 'webhook', durable: 'always', audience: 'scope',
    description: 'POST …/webhooks/{id}/test: sent at once to that one webhook',
    content: WebhookPingContent,
  } satisfies Defined<typeof WebhookPingContent>,
  'actor.transition': transientEvent('actor', 'a step of an actor or supervisor of this process\'s supervision tree; only on /admin/actors/live, never on the bus or the firehose', z.looseObject({
    supervisor: z.string().max(500), id: z.string().max(200), kind: z.string().max(100), event: z.string().max(200),
    state: z.json(), status: z.string().max(32), restarts: Count, at: z.number(), error: z.string().optional(),
  })),
  'stream.open': transientEvent('stream', 'the first frame of a live socket: it is authorised and subscribed; events follow (on the firehose only when its globs match stream.open)', StreamOpenContent),
  'stream.lagged': transientEvent('stream', 'the firehose dropped events for a slow subscriber; it continues from the newest', StreamLaggedContent),
};

/** Names made of a prefix and a message type: proto.client.<type> and proto.server.<type>. */
export const eventPatterns = {
  'proto.client.*': transientEvent('proto', 'a message a worker sent over /proto: type, worker, job id and size, never the payload', ProtoMessageContent),
  'proto.server.*': transientEvent('proto', 'a message the server sent over /proto: type, worker, job id and size, never the payload', ProtoMessageContent),
};
