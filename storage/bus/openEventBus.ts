// Chooses the event bus: Redis pub/sub when redis.url is set, PostgreSQL LISTEN/NOTIFY or in-memory otherwise.
import type { Sql } from 'postgres';
import type { Logger } from 'pino';
import type { Config } from '../../config/index.js';
import { createEventBus, type EventBus, type EventBusOptions } from './eventBus.js';
import { postgresRelay } from './postgresRelay.js';
import { redisRelay } from './redisRelay.js';

/**
 * The bus of a server process: across processes through Redis pub/sub when redis.url is set,
 * through PostgreSQL LISTEN/NOTIFY otherwise. The channel is named after the database, so
 * installations sharing one Redis stay apart when their databases have different names.
 */
export async function openEventBus(config: Pick<Config, 'redis.url'>, sql: Sql, log: Logger, options: EventBusOptions = {}): Promise<EventBus> {
  const [row] = await sql<{ name: string }[]>`select current_database() as name`;
  const database = row?.name ?? 'kiln';
  const url = config['redis.url'];
  if (url) return createEventBus('redis', log, (origin, onRemote) => redisRelay(origin, onRemote, { url, channel: `kiln:events:${database}`, log }), options);
  return createEventBus('postgres', log, (origin, onRemote) => postgresRelay(origin, onRemote, { sql, channel: 'kiln_events', log }), options);
}

/** A bus for this process alone (tools and tests that run one process). */
export function memoryEventBus(log: Logger): Promise<EventBus> {
  return createEventBus('memory', log);
}
