// A failed load as a person reads it: 404 and 403 in words, anything else as the API's message.
import { ApiFailure } from '$lib/api';

export function failureText(e: unknown, what: string): string {
  if (e instanceof ApiFailure && e.status === 404) return `No such ${what}, or you may not see it.`;
  if (e instanceof ApiFailure && e.status === 403) return `You may not see this ${what}.`;
  return e instanceof Error ? e.message : String(e);
}
