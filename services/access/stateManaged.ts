// Refusing API changes to what the state file manages.
import { ApiError } from '../../protocol/index.js';

/**
 * Things the state file declares are changed only through it (spec: "The member endpoints reject
 * them outright"); the API refuses with 403 state_managed instead of letting the next start undo
 * the change silently.
 */
export function demandNotStateManaged(row: { state_managed: boolean }, label: string): void {
  if (row.state_managed) {
    throw new ApiError('state_managed', `${label} is declared in the state file; change it there`);
  }
}
