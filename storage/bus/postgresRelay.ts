// Events between server processes through PostgreSQL LISTEN/NOTIFY, when no Redis is configured.
// Events published in one turn of the event loop share NOTIFY calls (a JSON array per payload);
// NOTIFY payloads are limited to 8000 bytes, so a larger event goes into event_relay and the
// NOTIFY carries its row id.
import type { Sql } from 'postgres';
import type { Logger } from 'pino';
import { fromWire, toWire, wirePrefix, type BusEvent, type BusListener, type Relay } from './eventBus.js';

export interface PostgresRelayOptions {
  sql: Sql;
  channel: string;
  log: Logger;
}

// Below PostgreSQL's 8000-byte limit, with room for the array brackets.
const PAYLOAD_LIMIT = 7900;
const RELAY_ROW_TTL = '5 minutes';
const CLEANUP_INTERVAL_MS = 60_000;

export async function postgresRelay(origin: string, onRemote: BusListener, opts: PostgresRelayOptions): Promise<Relay> {
  const { sql, channel, log } = opts;
  let warned = false;
  const warn = (err: unknown, what: string) => {
    if (!warned) log.warn({ err }, `${what}; events to the other server processes are dropped until PostgreSQL answers`);
    warned = true;
  };

  const receive = (value: unknown): void => {
    const event = fromWire(origin, value);
    if (event) onRemote(event);
  };
  const fetchRelayed = async (id: number): Promise<void> => {
    const [row] = await sql<{ payload: string }[]>`select payload from event_relay where id = ${id}`;
    if (row) receive(JSON.parse(row.payload));
  };
  // A batch is one process's (flush below): its own come back from PostgreSQL and are skipped unread.
  const ownBatch = `[${wirePrefix(origin)}`;
  const listener = await sql.listen(channel, (payload) => {
    if (payload.startsWith(ownBatch)) return;
    let value: unknown;
    try {
      value = JSON.parse(payload);
    } catch {
      return;
    }
    if (Array.isArray(value)) for (const item of value) receive(item);
    else if (typeof value === 'object' && value !== null && typeof (value as { r?: unknown }).r === 'number') {
      fetchRelayed((value as { r: number }).r).catch((err: unknown) => warn(err, 'could not read a relayed event'));
    }
  });

  let queue: string[] = [];
  let scheduled = false;
  const notify = (payload: string) =>
    sql`select pg_notify(${channel}, ${payload})`.then(() => {
      warned = false;
    });
  const flush = async (): Promise<void> => {
    scheduled = false;
    const batch = queue;
    queue = [];
    let parts: string[] = [];
    let size = 2;
    const sends: Promise<void>[] = [];
    for (const wire of batch) {
      const bytes = Buffer.byteLength(wire);
      if (bytes + 2 > PAYLOAD_LIMIT) {
        sends.push(
          sql<{ id: string }[]>`insert into event_relay (payload) values (${wire}) returning id`.then(([row]) => notify(JSON.stringify({ r: Number(row!.id) }))),
        );
        continue;
      }
      if (size + bytes + 1 > PAYLOAD_LIMIT) {
        sends.push(notify(`[${parts.join(',')}]`));
        parts = [];
        size = 2;
      }
      parts.push(wire);
      size += bytes + 1;
    }
    if (parts.length > 0) sends.push(notify(`[${parts.join(',')}]`));
    const results = await Promise.allSettled(sends);
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) warn(failed.reason, 'PostgreSQL did not take a NOTIFY');
  };

  const cleanup = setInterval(() => {
    sql`delete from event_relay where created_at < now() - ${RELAY_ROW_TTL}::interval`.catch(() => undefined);
  }, CLEANUP_INTERVAL_MS);
  cleanup.unref();

  return {
    send(event: BusEvent) {
      queue.push(toWire(origin, event));
      if (!scheduled) {
        scheduled = true;
        setImmediate(() => void flush());
      }
    },
    async close() {
      clearInterval(cleanup);
      if (queue.length > 0) await flush();
      await listener.unlisten().catch(() => undefined);
    },
  };
}
