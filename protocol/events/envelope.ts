// One envelope for WebSocket frames, webhook bodies and task action bodies (spec: Events).
import { z } from 'zod';

export const Envelope = z.strictObject({
  event: z.string().min(1).max(200),
  /** ISO 8601 UTC with milliseconds: 2026-11-22T10:00:00.000Z */
  at: z.iso.datetime({ precision: 3 }),
  content: z.record(z.string(), z.unknown()),
});
export type Envelope = z.infer<typeof Envelope>;

// The last time rendered: the events of one turn (a dispatch batch's thousands) share their `at`.
let lastMs = Number.NaN;
let lastText = '';

/** Date#toISOString is always UTC with exactly three fraction digits, as the spec asks. */
export function eventTime(epochMs: number): string {
  if (epochMs !== lastMs) {
    lastText = new Date(epochMs).toISOString(); // throws for an invalid time, before the memo changes
    lastMs = epochMs;
  }
  return lastText;
}

/** The exact text that is sent, signed and stored; the same bytes on every retry. */
export function renderEnvelope(event: string, atMs: number, content: Readonly<Record<string, unknown>>): string {
  return JSON.stringify({ event, at: eventTime(atMs), content });
}
