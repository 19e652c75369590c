// The admission policy of the UploadBudget (upload.concurrency, upload.bytesBudget and the small
// window in spec/configuration.md), as pure functions over a ledger, so that the machine in
// uploadBudget.ts only decides when to apply it and the rules can be read in one place.
import { z } from 'zod';
import { describeIssue } from '../protocol/index.js';

const positiveInt = z.number().int().positive();

/** The budget's limits. `smallWindow` and `smallBytes` are fixed by the spec (128 and 1 MiB). */
export const UploadLimits = z.object({
  /** Large uploads (over `smallBytes`) admitted at once: upload.concurrency. */
  concurrency: positiveInt,
  /** Total bytes of admitted uploads, small and large together: upload.bytesBudget. */
  bytesBudget: positiveInt,
  /** Small uploads admitted at once, a window of their own beside `concurrency`. */
  smallWindow: positiveInt.default(128),
  /** Uploads of at most this many bytes are small. */
  smallBytes: z.number().int().nonnegative().default(1_048_576),
});
export type UploadLimits = z.infer<typeof UploadLimits>;
export type UploadLimitsInput = z.input<typeof UploadLimits>;

/** Checks limits that come from configuration; the error names the offending field. */
export function parseUploadLimits(input: unknown): UploadLimits {
  const parsed = UploadLimits.safeParse(input);
  if (parsed.success) return parsed.data;
  const { field, reason } = describeIssue(parsed.error, 'input');
  throw new Error(`UploadBudget ${field}: ${reason}`);
}

export interface UploadRequest {
  /** Unique among the requests the budget knows (the caller's facade assigns it). */
  id: string;
  bytes: number;
  /**
   * Who uploads (the user, whichever key or session it came through): permits are shared fairly
   * between owners (`fairToOwners`). Requests without an owner (the server's own) are not capped.
   */
  owner?: string;
}

/** What the budget knows: requests in arrival order that wait, and permits that are held. */
export interface UploadLedger {
  waiting: UploadRequest[];
  granted: UploadRequest[];
}

export type SizeClass = 'small' | 'large';

export const sizeClass = (limits: UploadLimits, bytes: number): SizeClass =>
  bytes <= limits.smallBytes ? 'small' : 'large';

export interface UploadUsage {
  small: number;
  large: number;
  bytes: number;
}

export function usageOf(limits: UploadLimits, granted: readonly UploadRequest[]): UploadUsage {
  const use: UploadUsage = { small: 0, large: 0, bytes: 0 };
  for (const request of granted) {
    use[sizeClass(limits, request.bytes)] += 1;
    use.bytes += request.bytes;
  }
  return use;
}

const windowOf = (limits: UploadLimits, cls: SizeClass): number =>
  cls === 'small' ? limits.smallWindow : limits.concurrency;

// With nothing in flight every request fits: that is how an upload larger than the whole budget
// gets to run, and then it runs alone because the bytes in flight exceed the budget.
const fitsBytes = (limits: UploadLimits, use: UploadUsage, bytes: number): boolean =>
  use.small + use.large === 0 || use.bytes + bytes <= limits.bytesBudget;

/** Permits of a class an owner may hold while nobody else waits: the rest stay free for newcomers. */
export const uncontestedCap = (window: number): number => Math.max(1, window - Math.ceil(window / 4));

type OwnerCounts = Map<string, number>;
const bump = (counts: OwnerCounts, owner: string, by: number): void => void counts.set(owner, (counts.get(owner) ?? 0) + by);

/**
 * Rule 4, fairness between owners, per class. `share` is the window divided among the owners that
 * hold or wait for permits of the class (rounded up, so the shares cover the window). An owner is
 * granted another permit only while it holds fewer than its share when another owner under its own
 * share waits, and fewer than `uncontestedCap` otherwise: one tenant never takes the whole window,
 * so a newcomer finds a permit free, or gets the next one given back, ahead of the owners over
 * their share. Permits already held are never taken away (the minimum body rate cuts uploads that
 * hold one without sending).
 */
class FairShares {
  private readonly held: Record<SizeClass, OwnerCounts> = { small: new Map(), large: new Map() };
  private readonly waits: Record<SizeClass, OwnerCounts> = { small: new Map(), large: new Map() };

  constructor(
    private readonly limits: UploadLimits,
    granted: readonly UploadRequest[],
    waiting: readonly UploadRequest[],
  ) {
    for (const r of granted) if (r.owner !== undefined) bump(this.held[sizeClass(limits, r.bytes)], r.owner, 1);
    for (const r of waiting) if (r.owner !== undefined) bump(this.waits[sizeClass(limits, r.bytes)], r.owner, 1);
  }

  private share(cls: SizeClass): number {
    const owners = new Set([...this.held[cls].keys(), ...this.waits[cls].keys()]);
    return Math.ceil(windowOf(this.limits, cls) / Math.max(1, owners.size));
  }

  mayGrant(request: UploadRequest, cls: SizeClass): boolean {
    const owner = request.owner;
    if (owner === undefined) return true;
    const share = this.share(cls);
    const held = this.held[cls];
    let contested = false;
    for (const [other, count] of this.waits[cls]) {
      if (other !== owner && count > 0 && (held.get(other) ?? 0) < share) contested = true;
    }
    return (held.get(owner) ?? 0) < (contested ? share : uncontestedCap(windowOf(this.limits, cls)));
  }

  granted(request: UploadRequest, cls: SizeClass): void {
    if (request.owner === undefined) return;
    bump(this.held[cls], request.owner, 1);
    bump(this.waits[cls], request.owner, -1);
    if (this.waits[cls].get(request.owner) === 0) this.waits[cls].delete(request.owner);
  }
}

/**
 * Grants waiting requests in arrival order under four rules.
 * 1. Windows are per class: a request waits while its class's window is full (large:
 *    `concurrency`, small: `smallWindow`) and behind any earlier waiter of its own class. A full
 *    large window never holds back small uploads, nor the other way round.
 * 2. Bytes go strictly in arrival order: once a request whose window has room does not fit in the
 *    bytes left, nothing that arrived after it is granted, in either class. This is what keeps a
 *    large upload from being starved by a stream of small ones: they cannot take the bytes it waits
 *    for, so it waits only for permits granted before it arrived.
 * 3. A request that fits in no budget at all (bytes > bytesBudget) is granted when nothing is in
 *    flight, and then runs alone; under rule 2 it holds back everything behind it meanwhile.
 * 4. Fairness (FairShares): a request whose owner holds its share waits without holding back
 *    the requests of other owners behind it; the rules above apply to those that may be granted.
 */
export function admit(limits: UploadLimits, ledger: UploadLedger): UploadLedger {
  if (ledger.waiting.length === 0) return ledger;
  const use = usageOf(limits, ledger.granted);
  const granted = [...ledger.granted];
  const waiting: UploadRequest[] = [];
  const windowFull: Record<SizeClass, boolean> = { small: false, large: false };
  const fair = new FairShares(limits, ledger.granted, ledger.waiting);
  for (let i = 0; i < ledger.waiting.length; i++) {
    const request = ledger.waiting[i]!;
    const cls = sizeClass(limits, request.bytes);
    if (!windowFull[cls] && use[cls] < windowOf(limits, cls) && !fair.mayGrant(request, cls)) {
      waiting.push(request); // rule 4: its owner has its share; others behind it may go
      continue;
    }
    if (windowFull[cls] || use[cls] >= windowOf(limits, cls)) {
      windowFull[cls] = true;
      waiting.push(request);
      if (windowFull.small && windowFull.large) return { waiting: waiting.concat(ledger.waiting.slice(i + 1)), granted };
      continue;
    }
    if (!fitsBytes(limits, use, request.bytes)) {
      return { waiting: waiting.concat(ledger.waiting.slice(i)), granted }; // rule 2
    }
    granted.push(request);
    fair.granted(request, cls);
    use[cls] += 1;
    use.bytes += request.bytes;
  }
  return { waiting, granted };
}

/** Whether the ledger knows the id, waiting or granted; requests are idempotent by id. */
export const knows = (ledger: UploadLedger, id: string): boolean =>
  ledger.waiting.some((r) => r.id === id) || ledger.granted.some((r) => r.id === id);

/** Drops a request, waiting or granted, then admits what now fits; unknown ids change nothing. */
export function forget(limits: UploadLimits, ledger: UploadLedger, id: string): UploadLedger {
  const waiting = ledger.waiting.filter((r) => r.id !== id);
  const granted = ledger.granted.filter((r) => r.id !== id);
  if (waiting.length === ledger.waiting.length && granted.length === ledger.granted.length) return ledger;
  return admit(limits, { waiting, granted });
}
