// How many crashes a supervisor absorbs before it gives up (Erlang's MaxR within MaxT): a child
// that keeps failing is a fault restarts cannot fix, so the supervisor escalates instead of
// looping.

export interface RestartBudgetLimits {
  /** Restarts allowed within the window; one more failure escalates. 0 escalates the first failure. */
  maxRestarts: number;
  /** Length of the sliding window in milliseconds. */
  withinMs: number;
}

export const defaultRestartBudget: RestartBudgetLimits = { maxRestarts: 5, withinMs: 10_000 };

export function checkRestartBudget(limits: RestartBudgetLimits, owner: string): RestartBudgetLimits {
  if (!Number.isSafeInteger(limits.maxRestarts) || limits.maxRestarts < 0) {
    throw new RangeError(`supervisor ${owner} restartBudget.maxRestarts: expected an integer >= 0, got ${String(limits.maxRestarts)}`);
  }
  if (!Number.isSafeInteger(limits.withinMs) || limits.withinMs < 1) {
    throw new RangeError(`supervisor ${owner} restartBudget.withinMs: expected an integer >= 1, got ${String(limits.withinMs)}`);
  }
  return limits;
}

/** The restarts of one supervisor (all its children together) within a sliding window. */
export class RestartBudget {
  private restartTimes: number[] = [];

  constructor(
    readonly limits: RestartBudgetLimits,
    private readonly now: () => number,
  ) {}

  /** Records a restart when the budget still allows one; false means the supervisor must give up. */
  tryRestart(): boolean {
    const now = this.now();
    this.restartTimes = this.restartTimes.filter((at) => at > now - this.limits.withinMs);
    if (this.restartTimes.length >= this.limits.maxRestarts) return false;
    this.restartTimes.push(now);
    return true;
  }

  /** Restarts still inside the window now: how much of the budget is spent. */
  recent(): number {
    const now = this.now();
    return this.restartTimes.filter((at) => at > now - this.limits.withinMs).length;
  }

  /** A supervisor restarted by its parent starts with a full budget, like a new process. */
  reset(): void {
    this.restartTimes = [];
  }
}
