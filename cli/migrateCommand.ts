// `kiln migrate`: the database migrations.
import type { Command } from 'commander';
import { createLogger } from '../config/index.js';
import { configFromCommand, withConfigFlags } from './configSources.js';

/** `kiln migrate`: applies pending migrations (the server also does at start) and exits. */
export function migrateCommand(program: Command): void {
  withConfigFlags(program.command('migrate').description('apply pending database migrations and exit'), 'server').action(
    async (_opts, cmd: Command) => {
      const loaded = configFromCommand(cmd, 'server');
      const log = createLogger(loaded.values);
      const { migrate, openDatabase } = await import('../storage/index.js'); // loaded only for `migrate`
      const db = await openDatabase(loaded.values, log, { urlIsDefault: loaded.sourceOf('database.url').kind === 'default', migrate: false });
      try {
        const { applied } = await migrate(db.scheduler, { log });
        process.stdout.write(applied.length === 0 ? 'database is up to date\n' : `applied: ${applied.join(', ')}\n`);
      } finally {
        await db.close();
      }
    },
  );
}
