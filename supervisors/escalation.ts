// What a supervisor hands to its parent when its restart budget is spent, and what the root hands
// to the server (which logs it and exits non-zero).
import type { RestartBudgetLimits } from './restartBudget.js';

export const describeError = (error: unknown): string =>
  error instanceof Error ? error.message : String(error);

export class EscalationError extends Error {
  override readonly name = 'EscalationError';

  constructor(
    /** Path of the supervisor that gave up, e.g. "root/uploads". */
    readonly supervisor: string,
    /** Id of the child whose failure spent the budget. */
    readonly child: string,
    readonly budget: RestartBudgetLimits,
    cause: unknown,
  ) {
    super(
      `supervisor ${supervisor} gave up: child ${child} failed with its restart budget spent ` +
        `(${budget.maxRestarts} restarts within ${budget.withinMs} ms); last error: ${describeError(cause)}`,
      { cause },
    );
  }
}
