// Events between server processes through PostgreSQL LISTEN/NOTIFY, when no Redis is configured.
// Events published in one turn of the event loop share one NOTIFY (a JSON array). NOTIFY payloads
// are limited to 8000 bytes, so a turn's events that do not fit go into one event_relay row (a
// JSON array) and the one NOTIFY carries its row id: a scheduler pass that emits thousands of
// build events costs one insert and one NOTIFY, not a NOTIFY per 8000 bytes (issue 23).
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
    if (!row) return;
    const value: unknown = JSON.parse(row.payload);
    // a turn's events as an array; a single event as written before
    if (Array.isArray(value)) for (const item of value) receive(item);
    else receive(value);
  };
  // A batch is one process's (flush below): its own come back from PostgreSQL and are skipped unread.
  const ownBatch = `[${wirePrefix(origin)}`;
  const ownRow = wirePrefix(origin);
  const listener = await sql.listen(channel, (payload) => {
    if (payload.startsWith(ownBatch) || payload.startsWith(ownRow)) return;
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
  let queuedBytes = 0;
  let scheduled = false;
  const notify = (payload: string) =>
    sql`select pg_notify(${channel}, ${payload})`.then(() => {
      warned = false;
    });
  const flush = async (): Promise<void> => {
    scheduled = false;
    const batch = `[${queue.join(',')}]`;
    const fits = queuedBytes + queue.length + 1 <= PAYLOAD_LIMIT;
    queue = [];
    queuedBytes = 0;
    try {
      if (fits) await notify(batch);
      else {
        // the row and its notice in one statement (one commit, so a reader finds the row); the origin
        // first, so the sender skips its own notice unread
        await sql`
          with row as (insert into event_relay (payload) values (${batch}) returning id)
          select pg_notify(${channel}, ${ownRow} || '"r":' || row.id || '}') from row`;
        warned = false;
      }
    } catch (err) {
      warn(err, 'PostgreSQL did not take a NOTIFY');
    }
  };

  const cleanup = setInterval(() => {
    sql`delete from event_relay where created_at < now() - ${RELAY_ROW_TTL}::interval`.catch(() => undefined);
  }, CLEANUP_INTERVAL_MS);
  cleanup.unref();

  return {
    send(event: BusEvent) {
      const wire = toWire(origin, event);
      queue.push(wire);
      queuedBytes += Buffer.byteLength(wire);
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
