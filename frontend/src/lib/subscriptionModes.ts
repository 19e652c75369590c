// The subscription modes as a person reads them (protocol/api/subscriptions.ts: 0 read-write, 1 read-only, 2 write-only).
export const MODES: Record<0 | 1 | 2, string> = { 0: 'read-write', 1: 'read-only', 2: 'write-only' };
export const MODE_VALUES = [0, 1, 2] as const;
