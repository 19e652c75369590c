// The promise face of the UploadBudget for callers (the REST upload route, the worker /proto
// uploads): `const permit = await acquireUpload(budget, { bytes, signal }); … permit.release()`.
// It talks to the actor only by messages, so the actor may live behind a supervisor, be restarted,
// or move to another thread without callers noticing.
import type { Observer, Subscription } from 'xstate';
import type { UploadBudgetEvent, UploadBudgetSnapshot } from './uploadBudget.js';

/** What the facade needs of the actor: a plain xstate actor or a supervisor's handle. */
export interface UploadBudgetRef {
  send(event: UploadBudgetEvent): void;
  subscribe(observer: Observer<UploadBudgetSnapshot>): Subscription;
  /**
   * Counts fresh starts of the actor behind the ref (a supervisor's handle has it; a plain actor
   * never restarts). When it changes, the new actor knows nothing, so the facade sends again what
   * it still holds and what it still waits for.
   */
  readonly incarnation?: number;
}

export interface UploadPermit {
  readonly id: string;
  readonly bytes: number;
  /** Gives the permit back once the object is in storage or the upload failed. Safe to call twice. */
  release(): void;
}

export interface AcquireUploadOptions {
  /** Size of the upload; over 1 MiB it is large (upload.concurrency), else small (the window of 128). */
  bytes: number;
  /**
   * Gives up waiting: the request leaves the queue and the promise rejects with `signal.reason`.
   * The REST route passes `AbortSignal.timeout(upload.restWaitSecs * 1000)` and answers 503 with
   * Retry-After on the TimeoutError. Aborting after the permit was granted changes nothing.
   */
  signal?: AbortSignal;
  /** Who uploads (a user id): permits are shared fairly between owners (uploadAdmission.ts, rule 4). */
  owner?: string;
}

/** Waits for a permit from the budget. Permits are granted in the order of uploadAdmission.ts. */
export function acquireUpload(budget: UploadBudgetRef, options: AcquireUploadOptions): Promise<UploadPermit> {
  const { bytes, signal, owner } = options;
  if (!Number.isSafeInteger(bytes) || bytes < 0) {
    return Promise.reject(new RangeError(`acquireUpload bytes: expected a byte count (an integer >= 0), got ${String(bytes)}`));
  }
  return deskFor(budget).acquire(bytes, signal, owner);
}

const withOwner = <E extends UploadBudgetEvent>(event: E, owner: string | undefined): E => (owner === undefined ? event : { ...event, owner });

interface Waiter {
  bytes: number;
  owner: string | undefined;
  grant(permit: UploadPermit): void;
  fail(reason: unknown): void;
}

// One desk per budget ref, so thousands of waiters share one subscription and one id sequence.
const desks = new WeakMap<UploadBudgetRef, PermitDesk>();
function deskFor(budget: UploadBudgetRef): PermitDesk {
  let desk = desks.get(budget);
  if (!desk) {
    desk = new PermitDesk(budget);
    desks.set(budget, desk);
  }
  return desk;
}

class PermitDesk {
  private sequence = 0;
  // Map order is request order, which is the order to re-request in after a restart.
  private readonly waiters = new Map<string, Waiter>();
  private readonly held = new Map<string, { bytes: number; owner: string | undefined }>();
  private incarnation: number | undefined;
  private closed: unknown = undefined;
  private subscription: Subscription | undefined;

  constructor(private readonly budget: UploadBudgetRef) {
    this.incarnation = budget.incarnation;
  }

  acquire(bytes: number, signal: AbortSignal | undefined, owner: string | undefined): Promise<UploadPermit> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.closed !== undefined) return Promise.reject(this.closed);
    this.subscription ??= this.budget.subscribe({
      next: (snapshot) => this.onSnapshot(snapshot),
      error: (err) => this.close(err),
      complete: () => this.close(new Error('the upload budget actor has stopped')),
    });
    const id = `upload-${++this.sequence}`;
    return new Promise<UploadPermit>((resolve, reject) => {
      const onAbort = (): void => {
        if (!this.waiters.delete(id)) return;
        this.budget.send({ type: 'upload.cancel', id });
        reject(signal?.reason);
      };
      const detach = (): void => signal?.removeEventListener('abort', onAbort);
      this.waiters.set(id, {
        bytes,
        owner,
        grant: (permit) => (detach(), resolve(permit)),
        fail: (reason) => (detach(), reject(reason)),
      });
      signal?.addEventListener('abort', onAbort, { once: true });
      this.budget.send(withOwner({ type: 'upload.request', id, bytes }, owner));
    });
  }

  private onSnapshot(snapshot: UploadBudgetSnapshot): void {
    if (this.budget.incarnation !== this.incarnation) {
      this.incarnation = this.budget.incarnation;
      this.registerAgain();
    }
    if (this.waiters.size === 0) return;
    for (const { id } of snapshot.context.granted) {
      const waiter = this.waiters.get(id);
      if (!waiter) continue;
      this.waiters.delete(id);
      this.held.set(id, { bytes: waiter.bytes, owner: waiter.owner });
      waiter.grant(this.permit(id, waiter.bytes));
    }
  }

  // Held permits first, so the new actor counts them before it admits anyone waiting.
  private registerAgain(): void {
    for (const [id, { bytes, owner }] of this.held) this.budget.send(withOwner({ type: 'upload.restore', id, bytes }, owner));
    for (const [id, { bytes, owner }] of this.waiters) this.budget.send(withOwner({ type: 'upload.request', id, bytes }, owner));
  }

  private permit(id: string, bytes: number): UploadPermit {
    let released = false;
    return {
      id,
      bytes,
      release: () => {
        if (released) return;
        released = true;
        this.held.delete(id);
        this.budget.send({ type: 'upload.release', id });
      },
    };
  }

  private close(reason: unknown): void {
    this.closed = reason;
    for (const waiter of this.waiters.values()) waiter.fail(reason);
    this.waiters.clear();
  }
}
