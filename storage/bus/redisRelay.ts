// Events between server processes through Redis pub/sub (redis.url). Publishing is pipelined by
// ioredis; while Redis is away, events are dropped (the bus is best effort) and one warning is
// logged until it answers again. The subscriber reconnects and resubscribes by itself.
import type { Logger } from 'pino';
import { fromWire, toWire, wirePrefix, type BusListener, type Relay } from './eventBus.js';

export interface RedisRelayOptions {
  url: string;
  channel: string;
  log: Logger;
}

function describe(url: string): string {
  const u = new URL(url);
  return `${u.hostname}:${u.port || '6379'}`;
}

export async function redisRelay(origin: string, onRemote: BusListener, opts: RedisRelayOptions): Promise<Relay> {
  // loaded only with redis.url set: ioredis adds ~16 MiB to a process that never talks to Redis
  const { Redis } = await import('ioredis');
  const pub = new Redis(opts.url, { lazyConnect: true, enableAutoPipelining: true, maxRetriesPerRequest: 1, enableOfflineQueue: false });
  const sub = new Redis(opts.url, { lazyConnect: true, maxRetriesPerRequest: null });
  // Failures are reported where a command fails; ioredis reconnects by itself.
  pub.on('error', () => undefined);
  sub.on('error', () => undefined);
  try {
    await Promise.all([pub.connect(), sub.connect()]);
    await sub.subscribe(opts.channel);
  } catch (cause) {
    pub.disconnect();
    sub.disconnect();
    throw new Error(`cannot connect to Redis at ${describe(opts.url)} (redis.url) for the event bus: ${(cause as Error).message}`, { cause });
  }
  const own = wirePrefix(origin);
  sub.on('message', (channel: string, message: string) => {
    if (channel !== opts.channel || message.startsWith(own)) return;
    let value: unknown;
    try {
      value = JSON.parse(message);
    } catch {
      return;
    }
    const event = fromWire(origin, value);
    if (event) onRemote(event);
  });
  let warned = false;
  return {
    send(event) {
      pub.publish(opts.channel, toWire(origin, event)).then(
        () => {
          warned = false;
        },
        (err: unknown) => {
          if (!warned) opts.log.warn({ err }, 'Redis did not take an event for the other server processes; dropping events until it does');
          warned = true;
        },
      );
    },
    async close() {
      await Promise.all([pub.quit().catch(() => pub.disconnect()), sub.quit().catch(() => sub.disconnect())]);
    },
  };
}
