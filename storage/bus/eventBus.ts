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

/** What travels between processes: origin (so a process skips its own), event, scope, frame. */
export interface WireEvent {
  o: string;
  e: string;
  s: EventScope;
  f: string;
}

export function toWire(origin: string, event: BusEvent): string {
  const wire: WireEvent = { o: origin, e: event.event, s: event.scope, f: event.frame };
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
  return { event: w.e, scope: w.s, frame: w.f };
}

export async function createEventBus(transport: BusTransport, log: Logger, relayFactory?: RelayFactory): Promise<EventBus> {
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
  const relay = relayFactory ? await relayFactory(origin, deliver) : null;
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
