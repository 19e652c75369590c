// The migration runner: `kiln migrate` and every server start call it, possibly several processes
// at once, so all of it runs under one session-level advisory lock on a reserved connection.
import type { ReservedSql, Sql } from 'postgres';
import type { Logger } from 'pino';
import { readMigrations, type MigrationFile } from './migrationFiles.js';

export interface MigrateOptions {
  /** defaults to storage/db/migrations */
  directory?: string;
  log?: Logger;
}

// hashtextextended() turns the name into the bigint key server-side, so the key is readable in pg_locks' docs and here.
const LOCK_NAME = 'kiln.schema_migrations';

/** Applies the pending migrations in order, each in its own transaction; returns the names it applied. */
export async function migrate(sql: Sql, opts: MigrateOptions = {}): Promise<{ applied: string[] }> {
  const files = await readMigrations(opts.directory);
  const conn = await sql.reserve();
  try {
    await takeLock(conn, opts.log);
    try {
      await createMigrationsTable(conn);
      const recorded = await conn<{ name: string; checksum: string }[]>`select name, checksum from schema_migrations order by name`;
      const applied: string[] = [];
      for (const file of pendingMigrations(files, recorded)) {
        await applyMigration(conn, file);
        opts.log?.info({ migration: file.name }, 'applied database migration');
        applied.push(file.name);
      }
      return { applied };
    } finally {
      // If the connection broke, the server already dropped the lock with the session.
      await conn`select pg_advisory_unlock(hashtextextended(${LOCK_NAME}, 0))`.catch(() => undefined);
    }
  } finally {
    conn.release();
  }
}

async function takeLock(conn: ReservedSql, log: Logger | undefined): Promise<void> {
  const [row] = await conn<{ locked: boolean }[]>`select pg_try_advisory_lock(hashtextextended(${LOCK_NAME}, 0)) as locked`;
  if (row?.locked) return;
  log?.info('waiting for another process to finish migrating the database');
  await conn`select pg_advisory_lock(hashtextextended(${LOCK_NAME}, 0))`;
}

// The runner creates its own table: it has to read it before the first migration runs.
async function createMigrationsTable(conn: ReservedSql): Promise<void> {
  const [row] = await conn<{ exists: boolean }[]>`select to_regclass('schema_migrations') is not null as exists`;
  if (row?.exists) return;
  await conn`
    create table schema_migrations (
      name text primary key,
      checksum text not null,
      applied_at timestamptz not null default now()
    )`;
}

/** The files still to apply, after checking that what the database recorded matches the files. */
function pendingMigrations(files: readonly MigrationFile[], recorded: readonly { name: string; checksum: string }[]): MigrationFile[] {
  const byName = new Map(files.map((f) => [f.name, f]));
  let lastApplied = 0;
  for (const row of recorded) {
    const file = byName.get(row.name);
    if (!file) {
      throw new Error(`the database has migration ${row.name} applied, which this kiln does not have: a newer kiln migrated it; run that version (migrations are forward-only)`);
    }
    if (file.checksum !== row.checksum) {
      throw new Error(
        `migration ${row.name} was changed after it was applied (checksum ${row.checksum.slice(0, 12)}… in the database, ` +
          `${file.checksum.slice(0, 12)}… on disk); migrations are forward-only: restore the applied text and put the change in a new migration`,
      );
    }
    lastApplied = Math.max(lastApplied, file.number);
  }
  const done = new Set(recorded.map((r) => r.name));
  const pending = files.filter((f) => !done.has(f.name));
  const early = pending.find((f) => f.number < lastApplied);
  if (early) {
    throw new Error(`migration ${early.name} is not applied but a later-numbered one is; renumber it after the last applied migration`);
  }
  return pending;
}

async function applyMigration(conn: ReservedSql, file: MigrationFile): Promise<void> {
  // A reserved connection has no begin(); the transaction is spelled out so the whole file and
  // its schema_migrations row commit together or not at all.
  await conn.unsafe('begin');
  try {
    await conn.unsafe(file.text);
    await conn`insert into schema_migrations (name, checksum) values (${file.name}, ${file.checksum})`;
    await conn.unsafe('commit');
  } catch (cause) {
    await conn.unsafe('rollback').catch(() => undefined);
    throw new Error(`migration ${file.name} failed and was rolled back: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}
