// The three connection pools of a server process, kept apart so that a flood of cache requests
// cannot starve the API or the scheduler (configuration.md, database.*).
import postgres, { type Sql } from 'postgres';
import type { Logger } from 'pino';
import { postgresJsOptions, type DatabaseTarget } from './databaseUrl.js';

export type PoolName = 'web' | 'cache' | 'scheduler';

/** Session settings of every kiln connection (benches open theirs with the same). */
export const KILN_SESSION = { jit: 'off' } as const;

export function openPool(target: DatabaseTarget, name: PoolName, max: number, log: Logger): Sql {
  const options = postgresJsOptions(target);
  return postgres({
    ...options,
    max,
    // Named per pool, so pg_stat_activity shows which part of kiln holds a connection. No JIT:
    // kiln's statements are short, and the planner's estimates for set-returning functions
    // (unnest, jsonb_each_text) cross jit_above_cost on tiny plans (docs/database.md, "JIT").
    connection: { ...options.connection, ...KILN_SESSION, application_name: `kiln-${name}` },
    onnotice: (notice) => log.debug({ pool: name, notice: notice.message }, 'PostgreSQL notice'),
  });
}

/**
 * postgres.js has no minimum pool size: it opens connections on demand and, with no idle timeout
 * (its default, kept here), keeps them. So a minimum means "open this many at start": the first
 * requests then find connections ready, and a wrong URL fails the start instead of the first request.
 */
export async function warmPool(sql: Sql, min: number): Promise<void> {
  // A plain query first: it fails cleanly when the database is unreachable, whereas a pool with
  // several failed reserve() calls behind it can stall its own end() (postgres.js 3.4).
  await sql`select 1`;
  if (min <= 1) return;
  // Each reserve() holds its connection until released, so `min` reservations open `min` connections.
  const reserved = await Promise.allSettled(Array.from({ length: min }, () => sql.reserve()));
  for (const r of reserved) if (r.status === 'fulfilled') r.value.release();
  const failed = reserved.find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
}
