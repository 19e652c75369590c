// The embedded server's settings: the spec's defaults for localDb plus the localDb.* tunings.
import type { Config } from '../../config/index.js';

export type LocalDbConfig = Pick<Config, 'localDb.sharedBuffers' | 'localDb.effectiveCacheSize' | 'localDb.maintenanceWorkMem' | 'localDb.workMem'>;

// configuration.md, localDb: 200 connections cover the three pools (56 by default) plus pg-boss
// and maintenance; 1024 locks per transaction is the spec's value (kiln warns below 256).
export const LOCAL_DB_DEFAULTS: Readonly<Record<string, string>> = {
  random_page_cost: '1.1',
  max_connections: '200',
  max_locks_per_transaction: '1024',
};

const tunings = [
  ['localDb.sharedBuffers', 'shared_buffers'],
  ['localDb.effectiveCacheSize', 'effective_cache_size'],
  ['localDb.maintenanceWorkMem', 'maintenance_work_mem'],
  ['localDb.workMem', 'work_mem'],
] as const;

export function localDbSettings(config: LocalDbConfig): Record<string, string> {
  const settings: Record<string, string> = { ...LOCAL_DB_DEFAULTS };
  for (const [option, setting] of tunings) {
    const value = config[option];
    // null keeps PostgreSQL's own default; the registry has already checked the size (pgMemory).
    if (value !== null) settings[setting] = value;
  }
  return settings;
}
