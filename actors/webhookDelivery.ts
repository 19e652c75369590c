// The WebhookDelivery actor: one attempt of one delivery to a webhook or a task action, from the
// send to the recorded outcome (DESIGN.md: Actors and supervision). The row in event_deliveries is
// the source of truth and its status is this machine's state: a pg-boss job claims the row
// (attempting), this actor sends and records, and ends in delivered, retrying (the next job is
// queued with the outcome) or dead. docs/events.md has the retry schedule.
import { assign, fromPromise, setup, type SnapshotFrom } from 'xstate';
import { checkDeliveryPolicy, retryDelayMs, type DeliveryPolicy } from './deliveryBackoff.js';

/** What to send; the machine does not look inside. */
export type DeliveryRequest =
  | { kind: 'web'; url: string; body: string; headers: Readonly<Record<string, string>> }
  | { kind: 'mail'; to: readonly string[]; subject: string; text: string };

export interface DeliveryInput {
  deliveryId: string;
  /** this attempt's number, 1-based */
  attempt: number;
  maxAttempts: number;
  event: string;
  /** webhook, send_web_request or send_mail, for operators */
  target: string;
  request: DeliveryRequest;
  /** epoch ms */
  startedAt: number;
}

export interface SendResult {
  ok: boolean;
  status?: number;
  error?: string;
  excerpt?: string;
}

export type DeliveryVerdict = 'delivered' | 'retrying' | 'dead';

export interface DeliveryOutcome extends SendResult {
  finishedAt: number;
}

export interface DeliveryDecision {
  status: DeliveryVerdict;
  /** epoch ms of the next attempt when retrying */
  nextAttemptAt: number | null;
}

/** One attempt, decided: what the effects write in one transaction. */
export interface DeliveryRecord {
  input: DeliveryInput;
  outcome: DeliveryOutcome;
  decision: DeliveryDecision;
}

export interface DeliveryEffects {
  /** Sends and reports; a rejection counts as a transport failure. */
  send(request: DeliveryRequest): Promise<SendResult>;
  /** Writes the attempt and the row's new state (and queues the next job); a rejection crashes the actor. */
  record(record: DeliveryRecord): Promise<void>;
  /** epoch ms */
  now(): number;
}

export interface DeliveryContext {
  input: DeliveryInput;
  outcome: DeliveryOutcome | null;
  decision: DeliveryDecision | null;
}

/** Pure: what an outcome means for the delivery, given the attempts left and the schedule. */
export function decideDelivery(policy: DeliveryPolicy, input: DeliveryInput, outcome: DeliveryOutcome): DeliveryDecision {
  if (outcome.ok) return { status: 'delivered', nextAttemptAt: null };
  if (input.attempt >= input.maxAttempts) return { status: 'dead', nextAttemptAt: null };
  return { status: 'retrying', nextAttemptAt: outcome.finishedAt + retryDelayMs(policy, input.attempt) };
}

const describe = (error: unknown): string => (error instanceof Error ? error.message : String(error));

export function createWebhookDeliveryMachine(fx: DeliveryEffects, policy: DeliveryPolicy) {
  checkDeliveryPolicy(policy);
  return setup({
    types: {
      context: {} as DeliveryContext,
      input: {} as DeliveryInput,
      output: {} as DeliveryDecision,
    },
    actors: {
      send: fromPromise<DeliveryOutcome, DeliveryRequest>(async ({ input }) => {
        try {
          return { ...(await fx.send(input)), finishedAt: fx.now() };
        } catch (error) {
          return { ok: false, error: describe(error), finishedAt: fx.now() };
        }
      }),
      record: fromPromise<void, DeliveryRecord>(({ input }) => fx.record(input)),
    },
    guards: {
      delivered: ({ context }) => context.decision?.status === 'delivered',
      dead: ({ context }) => context.decision?.status === 'dead',
    },
  }).createMachine({
    id: 'webhookDelivery',
    context: ({ input }) => ({ input, outcome: null, decision: null }),
    initial: 'attempting',
    output: ({ context }) => context.decision ?? { status: 'retrying', nextAttemptAt: null },
    states: {
      attempting: {
        invoke: {
          src: 'send',
          input: ({ context }) => context.input.request,
          onDone: {
            target: 'recording',
            actions: assign(({ context, event }) => ({ outcome: event.output, decision: decideDelivery(policy, context.input, event.output) })),
          },
        },
      },
      // A failed write has no transition: the actor crashes, and its supervisor restarts it from
      // the row (the attempt is sent again under the same delivery id).
      recording: {
        invoke: {
          src: 'record',
          input: ({ context }) => ({ input: context.input, outcome: context.outcome!, decision: context.decision! }),
          onDone: [{ guard: 'delivered', target: 'delivered' }, { guard: 'dead', target: 'dead' }, { target: 'retrying' }],
        },
      },
      delivered: { type: 'final' },
      /** this attempt failed; the row waits for its next job */
      retrying: { type: 'final' },
      /** dead-lettered: no attempts left */
      dead: { type: 'final' },
    },
  });
}

export type WebhookDeliveryMachine = ReturnType<typeof createWebhookDeliveryMachine>;
export type WebhookDeliverySnapshot = SnapshotFrom<WebhookDeliveryMachine>;

export function summarizeDelivery(snapshot: WebhookDeliverySnapshot): Record<string, string | number> {
  const { input } = snapshot.context;
  return { delivery: input.deliveryId, event: input.event, target: input.target, attempt: input.attempt, maxAttempts: input.maxAttempts };
}
