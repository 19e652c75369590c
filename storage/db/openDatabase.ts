// Opening the database at start: which PostgreSQL (external, embedded, or the default socket),
// the three pools, the server checks and the migrations.
import type { Sql } from 'postgres';
import type { Logger } from 'pino';
import { registry, type Config } from '../../config/index.js';
import { connectionFailure } from './connectionFailure.js';
import { describeTarget, parseDatabaseUrl } from './databaseUrl.js';
import { startLocalDb, type LocalDb } from './local/startLocalDb.js';
import { localDbSettings } from './localDbSettings.js';
import { migrate } from './migrate.js';
import { openPool, warmPool } from './pools.js';
import { checkServerSettings } from './serverChecks.js';

export type DatabaseConfig = Pick<
  Config,
  | 'baseDir'
  | 'database.url'
  | 'database.maxConnections'
  | 'database.minConnections'
  | 'database.cache.maxConnections'
  | 'database.cache.minConnections'
  | 'database.web.maxConnections'
  | 'database.web.minConnections'
  | 'localDb.enable'
  | 'localDb.port'
  | 'localDb.sharedBuffers'
  | 'localDb.effectiveCacheSize'
  | 'localDb.maintenanceWorkMem'
  | 'localDb.workMem'
>;

export interface Database {
  /** the HTTP API's pool (database.web.*) */
  web: Sql;
  /** the binary cache's pool (database.cache.*) */
  cache: Sql;
  /** the scheduler's and workers' pool (database.*) */
  scheduler: Sql;
  /** the URL connected to, for pg-boss; it may hold a password: do not log it */
  url: string;
  /** ends the pools, then stops the embedded server if this call started one */
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  /**
   * database.url came from the registry's default, not from the operator (LoadedConfig.sourceOf);
   * decides the embedded server and the advice on failure. When absent, kiln compares the URL
   * with the default's text.
   */
  urlIsDefault?: boolean;
  /** apply pending migrations (default true); `kiln migrate` and the server both do */
  migrate?: boolean;
}

export async function openDatabase(config: DatabaseConfig, log: Logger, opts: OpenDatabaseOptions = {}): Promise<Database> {
  const urlIsDefault = opts.urlIsDefault ?? config['database.url'] === registry['database.url'].default;
  let local: LocalDb | undefined;
  let url = config['database.url'];
  if (config['localDb.enable'] && urlIsDefault) {
    local = await startLocalDb({ baseDir: config['baseDir'], port: config['localDb.port'], settings: localDbSettings(config), log });
    url = local.url;
  } else if (config['localDb.enable']) {
    // An explicit URL is the more specific wish (e.g. SERVICE_DATABASE_URL over the quick-start file).
    log.warn('database.url is set, so localDb.enable is ignored and no embedded PostgreSQL is started');
  }

  const pools: Sql[] = [];
  // timeout: seconds running queries get before their connections are closed under them.
  const close = async (timeout: number): Promise<void> => {
    await Promise.all(pools.map((p) => p.end({ timeout })));
    await local?.stop();
  };
  try {
    const target = parseDatabaseUrl(url);
    const web = openPool(target, 'web', config['database.web.maxConnections'], log);
    const cache = openPool(target, 'cache', config['database.cache.maxConnections'], log);
    const scheduler = openPool(target, 'scheduler', config['database.maxConnections'], log);
    pools.push(web, cache, scheduler);
    // allSettled: ending a pool while one of its connection attempts is still in flight stalls end().
    const warmed = await Promise.allSettled([
      warmPool(web, config['database.web.minConnections']),
      warmPool(cache, config['database.cache.minConnections']),
      warmPool(scheduler, config['database.minConnections']),
    ]);
    const failed = warmed.find((w) => w.status === 'rejected');
    if (failed) throw connectionFailure(failed.reason, target, urlIsDefault && !local);
    const pooled = config['database.web.maxConnections'] + config['database.cache.maxConnections'] + config['database.maxConnections'];
    await checkServerSettings(scheduler, pooled, log);
    if (opts.migrate ?? true) await migrate(scheduler, { log });
    log.info({ database: local ? `embedded, ${local.dataDir}` : describeTarget(target) }, 'database ready');
    let closing: Promise<void> | undefined;
    return { web, cache, scheduler, url, close: () => (closing ??= close(5)) };
  } catch (error) {
    await close(0).catch((cause: unknown) => log.error({ err: cause }, 'could not close the database after a failed start'));
    throw error;
  }
}
