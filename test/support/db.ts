// A fresh PostgreSQL database per test, cloned from a template that is migrated once per migration
// set (CREATE DATABASE … TEMPLATE copies files, ~50 ms, instead of replaying every migration). The
// template also holds pg-boss's schema: pg-boss installs it at its first start on a database, about
// a second of DDL that every test server would otherwise pay again.
import { createHash, randomBytes } from 'node:crypto';
import { getConstructionPlans } from 'pg-boss';
import pino from 'pino';
import postgres, { type Sql } from 'postgres';
import type { Test } from 'tap';
import { migrate, migrationSetChecksum, readMigrations, startQueue, stopQueue } from '../../storage/index.js';

export const TEST_DATABASE_URL = process.env['KILN_TEST_DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export interface TestDatabase {
  /** the URL of the new database (same server and role as KILN_TEST_DATABASE_URL) */
  url: string;
  /** a small pool on it, ended at teardown */
  sql: Sql;
}

export interface TestDatabaseOptions {
  /** false: an empty database, for tests of the migration runner itself (default true) */
  migrated?: boolean;
}

type Teardown = Pick<Test, 'teardown'>;

/** Creates a database for one test and drops it at the test's teardown. */
export async function testDatabase(t: Teardown, opts: TestDatabaseOptions = {}): Promise<TestDatabase> {
  const admin = await connectAdmin();
  const name = `kiln_test_${randomBytes(6).toString('hex')}`;
  try {
    const template = opts.migrated === false ? 'template0' : await migratedTemplate(admin);
    await admin.unsafe(`create database ${name} template ${template}`);
  } finally {
    await admin.end();
  }
  const url = databaseUrl(name);
  const sql = postgres(url, { max: 4, onnotice: () => undefined });
  t.teardown(async () => {
    await sql.end({ timeout: 5 });
    const cleanup = await connectAdmin();
    try {
      await cleanup.unsafe(`drop database if exists ${name} with (force)`);
    } finally {
      await cleanup.end();
    }
  });
  return { url, sql };
}

/** The URL of another database on the test server. */
export function databaseUrl(database: string): string {
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${database}`;
  return url.toString();
}

async function connectAdmin(): Promise<Sql> {
  const admin = postgres(TEST_DATABASE_URL, { max: 1, onnotice: () => undefined, connect_timeout: 5 });
  try {
    await admin`select 1`;
  } catch (cause) {
    await admin.end();
    throw new Error(
      `the tests need PostgreSQL at ${TEST_DATABASE_URL} (set KILN_TEST_DATABASE_URL to use another) and could not connect: ` +
        `${cause instanceof Error ? cause.message : String(cause)}. Start it with: pg_ctlcluster --skip-systemctl-redirect 15 main start`,
      { cause },
    );
  }
  return admin;
}

/**
 * Returns the name of the template for the current migrations and pg-boss schema, building it if
 * needed. Test files run in parallel, so the build happens under an advisory lock, and into a
 * scratch database that is renamed only when fully migrated: a crash never leaves a half-migrated
 * template behind.
 */
async function migratedTemplate(admin: Sql): Promise<string> {
  const version = createHash('sha256').update(migrationSetChecksum(await readMigrations())).update(getConstructionPlans()).digest('hex');
  const template = `kiln_tpl_${version.slice(0, 16)}`;
  await admin`select pg_advisory_lock(hashtextextended('kiln test template', 0))`;
  try {
    const [row] = await admin<{ exists: boolean }[]>`select exists (select from pg_database where datname = ${template}) as exists`;
    if (row?.exists) return template;
    const scratch = `${template}_building`;
    await admin.unsafe(`drop database if exists ${scratch} with (force)`);
    await admin.unsafe(`create database ${scratch} template template0`);
    const sql = postgres(databaseUrl(scratch), { max: 1, onnotice: () => undefined });
    try {
      await migrate(sql);
    } finally {
      await sql.end();
    }
    await stopQueue(await startQueue(databaseUrl(scratch), pino({ level: 'silent' }), { maxConnections: 2 }), { timeoutMs: 5_000 });
    await admin.unsafe(`alter database ${scratch} rename to ${template}`);
    return template;
  } finally {
    await admin`select pg_advisory_unlock(hashtextextended('kiln test template', 0))`;
  }
}
