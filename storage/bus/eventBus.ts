// The event bus: every event a process emits or relays, fanned out in this process (firehose, live
// sockets) and relayed to the other server processes of the installation. Best effort: durable
// delivery is the outbox's job, not the bus's. No ordering promise across processes.
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { EventScope } from '../../protocol/index.js';

/** One event on the bus. `frame` is the envelope's JSON text, rendered once and sent as is. */
export interface BusEvent {
  event: string;
  scope: EventScope;
  frame: string;
  /** when another process sent it (its clock, ms since the epoch); absent for this process's own */
  sentAt?: number;
}

export type BusListener = (event: BusEvent) => void;
export type BusTransport = 'memory' | 'redis' | 'postgres';

export interface EventBus {
  readonly transport: BusTransport;
  /** Delivers to this process's listeners at once, then relays to the other processes. */
  publish(event: BusEvent): void;
  /** Listeners run synchronously and must not throw; a throw is logged and the others still run. */
  subscribe(listener: BusListener): () => void;
  close(): Promise<void>;
}

/** Carries events to the other processes; `onRemote` is called for theirs. */
export interface Relay {
  send(event: BusEvent): void;
  close(): Promise<void>;
}

export type RelayFactory = (origin: string, onRemote: BusListener) => Promise<Relay>;

/** What travels between processes: origin (so a process skips its own), event, scope, frame, send time. */
export interface WireEvent {
  o: string;
  e: string;
  s: EventScope;
  f: string;
  /** ms since the epoch when it was sent: the receiver's kiln_event_bus_lag_seconds */
  t?: number;
}

export function toWire(origin: string, event: BusEvent, now = Date.now()): string {
  const wire: WireEvent = { o: origin, e: event.event, s: event.scope, f: event.frame, t: now };
  return JSON.stringify(wire);
}

/** A wire message from another process, or null for this process's own or a malformed one. */
/**
 * How every wire text a process sends begins (toWire puts the origin first): a relay that
 * receives its own process's events back skips them by this prefix, without parsing them.
 */
export const wirePrefix = (origin: string): string => `${JSON.stringify({ o: origin }).slice(0, -1)},`;

export function fromWire(origin: string, value: unknown): BusEvent | null {
  if (typeof value !== 'object' || value === null) return null;
  const w = value as Partial<WireEvent>;
  if (w.o === origin || typeof w.e !== 'string' || typeof w.f !== 'string' || typeof w.s !== 'object' || w.s === null) return null;
  return { event: w.e, scope: w.s, frame: w.f, ...(typeof w.t === 'number' && Number.isFinite(w.t) ? { sentAt: w.t } : {}) };
}

export interface EventBusOptions {
  /** seconds from another process's send to this process's receipt, for each event relayed (the metric's observer) */
  onRemoteLag?: (seconds: number) => void;
  now?: () => number;
}

export async function createEventBus(transport: BusTransport, log: Logger, relayFactory?: RelayFactory, options: EventBusOptions = {}): Promise<EventBus> {
  const origin = randomBytes(8).toString('hex');
  const listeners = new Set<BusListener>();
  const deliver = (event: BusEvent): void => {
    for (const listener of listeners) {
      try {
        listener(event);
      } catch (err) {
        log.error({ err, event: event.event }, 'an event bus listener failed');
      }
    }
  };
  const now = options.now ?? Date.now;
  const onLag = options.onRemoteLag;
  const deliverRemote = onLag === undefined ? deliver : (event: BusEvent): void => {
    // Clocks of different hosts differ: a negative lag is a clock ahead of ours, counted as 0.
    if (event.sentAt !== undefined) onLag(Math.max(0, now() - event.sentAt) / 1000);
    deliver(event);
  };
  const relay = relayFactory ? await relayFactory(origin, deliverRemote) : null;
  let closed = false;
  return {
    transport,
    publish(event) {
      if (closed) return;
      deliver(event);
      relay?.send(event);
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async close() {
      if (closed) return;
      closed = true;
      listeners.clear();
      await relay?.close();
    },
  };
}
