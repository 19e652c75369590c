// The UploadBudget actor: one per server process, it admits NAR and evaluation-cache uploads from
// workers and REST clients (DESIGN.md, "Actors and supervision"). The policy is in
// uploadAdmission.ts; callers use the promise facade in uploadPermit.ts.
import { assign, not, setup, type SnapshotFrom } from 'xstate';
import {
  admit,
  forget,
  knows,
  parseUploadLimits,
  usageOf,
  type UploadLimits,
  type UploadLimitsInput,
  type UploadRequest,
} from './uploadAdmission.js';

export type UploadBudgetInput = UploadLimitsInput;

export interface UploadBudgetContext {
  limits: UploadLimits;
  /** Requests in arrival order that have no permit yet. */
  waiting: UploadRequest[];
  /** Permits held until the object is in storage. */
  granted: UploadRequest[];
}

// Every event is idempotent by id, so a client may resend after the actor was restarted.
export type UploadBudgetEvent =
  /** Asks for a permit; it is granted when `id` appears in `context.granted`. */
  | { type: 'upload.request'; id: string; bytes: number; owner?: string }
  /** The waiter gave up (timeout or abort); a permit granted meanwhile is given back too. */
  | { type: 'upload.cancel'; id: string }
  /** The object is in storage (or the upload failed): the permit goes back. */
  | { type: 'upload.release'; id: string }
  /** A permit granted by an earlier incarnation of this actor is still held: count it again. */
  | { type: 'upload.restore'; id: string; bytes: number; owner?: string };

const requestOf = (event: { id: string; bytes: number; owner?: string }): UploadRequest =>
  event.owner === undefined ? { id: event.id, bytes: event.bytes } : { id: event.id, bytes: event.bytes, owner: event.owner };

export const uploadBudgetMachine = setup({
  types: {
    context: {} as UploadBudgetContext,
    input: {} as UploadBudgetInput,
    events: {} as UploadBudgetEvent,
  },
  actions: {
    enqueue: assign(({ context, event }) => {
      if (event.type !== 'upload.request' || knows(context, event.id)) return {};
      const request = requestOf(event);
      return admit(context.limits, { waiting: [...context.waiting, request], granted: context.granted });
    }),
    forget: assign(({ context, event }) => {
      if (event.type !== 'upload.cancel' && event.type !== 'upload.release') return {};
      return forget(context.limits, context, event.id);
    }),
    // A restored permit is counted even when it overshoots the limits: the upload is already
    // running, and new requests simply wait until enough permits are released.
    restore: assign(({ context, event }) => {
      if (event.type !== 'upload.restore' || knows(context, event.id)) return {};
      return { granted: [...context.granted, requestOf(event)] };
    }),
  },
  guards: {
    someoneWaits: ({ context }) => context.waiting.length > 0,
    permitsHeld: ({ context }) => context.granted.length > 0,
  },
}).createMachine({
  id: 'uploadBudget',
  context: ({ input }) => ({ limits: parseUploadLimits(input), waiting: [], granted: [] }),
  // Events are handled at the root; the states only name the situation for operators and are
  // chosen from the ledger after every event.
  on: {
    'upload.request': { actions: 'enqueue' },
    'upload.cancel': { actions: 'forget' },
    'upload.release': { actions: 'forget' },
    'upload.restore': { actions: 'restore' },
  },
  initial: 'idle',
  states: {
    /** No permit held, nobody waiting. */
    idle: {
      always: [
        { guard: 'someoneWaits', target: 'saturated' },
        { guard: 'permitsHeld', target: 'admitting' },
      ],
    },
    /** Permits held and every request so far admitted. */
    admitting: {
      always: [
        { guard: 'someoneWaits', target: 'saturated' },
        { guard: not('permitsHeld'), target: 'idle' },
      ],
    },
    /** At least one request waits for a window or for bytes. */
    saturated: {
      always: { guard: not('someoneWaits'), target: 'admitting' },
    },
  },
});

export type UploadBudgetSnapshot = SnapshotFrom<typeof uploadBudgetMachine>;

/** What GET /api/v1/admin/actors shows of the budget: counts, never ids or sizes of single uploads. */
export function summarizeUploadBudget(snapshot: UploadBudgetSnapshot): Record<string, number> {
  const { limits, waiting, granted } = snapshot.context;
  const use = usageOf(limits, granted);
  return {
    waiting: waiting.length,
    largeInFlight: use.large,
    smallInFlight: use.small,
    bytesInFlight: use.bytes,
    concurrency: limits.concurrency,
    smallWindow: limits.smallWindow,
    bytesBudget: limits.bytesBudget,
  };
}
