// The event system of a server process, built once at start (cli/kiln.ts): the bus, the emitter
// services use, the delivery engine, and the webhook and task action services.
import type { PgBoss } from 'pg-boss';
import type { Config, Logger } from '../../config/index.js';
import type { Clock } from '../../supervisors/index.js';
import type { DeliveryPolicy, DeliveryRequest, SendResult } from '../../actors/index.js';
import {
  createEvents,
  createOutboundClient,
  openEventBus,
  type Database,
  type EventBus,
  type Events,
  type KilnMetrics,
  type SecretBox,
} from '../../storage/index.js';
import type { Supervisor } from '../../supervisors/index.js';
import { startDeliveryEngine, type DeliveryEngine } from './deliveryEngine.js';
import { createWebRequestSender } from './webRequest.js';
import { createMailer, type Mailer } from '../accounts/index.js';
import { openSigningSecret } from './signingSecret.js';
import { taskActionsService, type TaskActionsService } from './taskActions.js';
import { accessWebhookAuthorizer, type WebhookAuthorizer } from './webhookScopes.js';
import { webhooksService, type WebhooksService } from './webhooks.js';

export interface EventSystemDeps {
  config: Config;
  db: Database;
  boss: PgBoss;
  root: Supervisor;
  secretBox: SecretBox;
  log: Logger;
  /** User-Agent of webhook requests, e.g. kiln/0.1.0 */
  userAgent: string;
  /** event times and attempt schedules */
  clock: Clock;
  /** this process's instance lease key (services/workers/serverInstance.ts): delivery attempts are claimed under it */
  leaseKey: number;
  /** kiln_webhook_deliveries_total */
  metrics?: Pick<KilnMetrics, 'webhookDelivery' | 'eventBusLag' | 'enabled'>;
}

/** Tuning for tests and benchmarks; production uses the defaults. */
export interface EventSystemOptions {
  /** the retry schedule (default: 30 s, 1, 2, 4, 8 min) */
  policy?: DeliveryPolicy;
  /** bound on one web request (default 10 s) */
  webTimeoutMs?: number;
  batchSize?: number;
  workers?: number;
  pollingIntervalSeconds?: number;
  recoveryIntervalMs?: number;
  /** who may manage which webhooks (default: services/access/access.ts rules) */
  authorizeWebhooks?: WebhookAuthorizer;
  /** a bus instead of the one redis.url selects */
  bus?: EventBus;
}

export interface EventSystem {
  /** how services emit: events.transaction(async (tx, emit) => …), events.publish(…) */
  events: Events;
  bus: EventBus;
  engine: DeliveryEngine;
  webhooks: WebhooksService;
  taskActions: TaskActionsService;
  close(): Promise<void>;
}

function mailSender(mailer: Mailer) {
  return async (request: Extract<DeliveryRequest, { kind: 'mail' }>): Promise<SendResult> => {
    const sent = await mailer.send({ to: request.to.join(', '), subject: request.subject, text: request.text });
    return sent === 'sent' ? { ok: true, excerpt: 'sent' } : { ok: true, excerpt: 'skipped: e-mail is not configured (email.enable, email.smtp.host)' };
  };
}

export async function openEventSystem(deps: EventSystemDeps, opts: EventSystemOptions = {}): Promise<EventSystem> {
  const { config, db, boss, root, secretBox, log } = deps;
  const now = () => deps.clock.now().getTime();
  const metrics = deps.metrics;
  const bus = opts.bus ?? (await openEventBus(config, db.scheduler, log, metrics?.enabled ? { onRemoteLag: (seconds) => metrics.eventBusLag(seconds) } : {}));
  const closers: (() => Promise<void> | void)[] = [() => bus.close()];
  const close = async () => {
    for (const c of closers.reverse()) await c();
  };
  try {
    const events = createEvents({ sql: db.web, bus, boss, now });
    // Webhooks and send_web_request actions reach only where outbound.allowedNetworks lets them.
    const outbound = createOutboundClient({ allowedNetworks: config['outbound.allowedNetworks'], maxSockets: 128 });
    closers.push(() => outbound.close());
    const web = createWebRequestSender({ client: outbound, ...(opts.webTimeoutMs ? { timeoutMs: opts.webTimeoutMs } : {}) });
    const mailer = createMailer(config, log);
    closers.push(() => mailer.close());
    const engine = await startDeliveryEngine({
      root,
      sql: db.scheduler,
      leaseKey: deps.leaseKey,
      boss,
      events: events.withPool(db.scheduler),
      senders: { web: (request) => web.send(request), mail: mailSender(mailer) },
      openSecret: (sealed) => openSigningSecret(secretBox, sealed),
      log,
      retentionDays: config['retentionDays'],
      userAgent: deps.userAgent,
      ...(opts.policy ? { policy: opts.policy } : {}),
      now,
      ...(opts.batchSize ? { batchSize: opts.batchSize } : {}),
      ...(opts.workers ? { workers: opts.workers } : {}),
      ...(opts.pollingIntervalSeconds ? { pollingIntervalSeconds: opts.pollingIntervalSeconds } : {}),
      ...(opts.recoveryIntervalMs ? { recoveryIntervalMs: opts.recoveryIntervalMs } : {}),
      ...(deps.metrics ? { onAttempt: (outcome: string) => deps.metrics?.webhookDelivery(outcome) } : {}),
    });
    closers.push(() => engine.stop());
    return {
      events,
      bus,
      engine,
      webhooks: webhooksService({ sql: db.web, events, engine, secretBox, authorize: opts.authorizeWebhooks ?? accessWebhookAuthorizer(db.web), outbound }),
      taskActions: taskActionsService({ sql: db.web, events, secretBox, outbound }),
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}
