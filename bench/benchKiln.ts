// A kiln for benchmarks: in this process, on a fresh database at 127.0.0.1:5432, with a signed-in
// user and public caches made directly in the database (as test/support/caches.ts does).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres, { type Sql } from 'postgres';
import { loadConfig, type OptionPath } from '../config/index.js';
import { startKiln, type Kiln } from '../cli/kiln.js';
import { generateCacheKey } from '../services/index.js';
import { openSecretBox } from '../storage/index.js';
import { startStatementCounter, type StatementCounter } from './statementCounter.js';

export interface BenchKiln {
  kiln: Kiln;
  sql: Sql;
  baseDir: string;
  token: string;
  createCache(name: string): Promise<void>;
  /** BENCH_COUNT_STATEMENTS=1: the server reaches PostgreSQL through a proxy counting its statements */
  statements: StatementCounter | null;
  stop(): Promise<void>;
}

/** kilns started by this process: each gets a database of its own */
let benchKilns = 0;

export async function startBenchKiln(overrides: Partial<Record<OptionPath, unknown>> = {}): Promise<BenchKiln> {
  const admin = postgres('postgres://postgres@127.0.0.1:5432/postgres', { max: 1, onnotice: () => undefined });
  const dbName = `kiln_bench_${process.pid}_${benchKilns++}`;
  await admin.unsafe(`create database ${dbName}`);
  // BENCH_AUTO_EXPLAIN=<ms>: every session on this database logs the plans (with actual rows and
  // buffers) of statements slower than that, as they ran, statistics stale or not
  // BENCH_LOG_STATEMENTS=1: every statement's duration to the server log (log_min_duration_statement = 0)
  if (process.env['BENCH_LOG_STATEMENTS']) await admin.unsafe(`alter database ${dbName} set log_min_duration_statement = 0`);
  const explainMs = process.env['BENCH_AUTO_EXPLAIN'];
  if (explainMs) {
    await admin.unsafe(`alter database ${dbName} set session_preload_libraries = 'auto_explain'`);
    for (const [name, value] of [['log_min_duration', `${Number(explainMs)}`], ['log_analyze', 'on'], ['log_buffers', 'on'], ['log_timing', 'off']]) {
      await admin.unsafe(`alter database ${dbName} set auto_explain.${name} = ${value}`);
    }
  }
  const url = `postgres://postgres@127.0.0.1:5432/${dbName}`;
  const baseDir = await mkdtemp(join(tmpdir(), 'kiln-bench-'));
  const statements = process.env['BENCH_COUNT_STATEMENTS'] ? await startStatementCounter({ host: '127.0.0.1', port: 5432 }) : null;
  const serverUrl = statements ? `postgres://postgres@127.0.0.1:${statements.port}/${dbName}` : url;
  const kiln = await startKiln(loadConfig({
    scope: 'server', env: {},
    overrides: { 'database.url': serverUrl, port: 0, useTls: false, 'log.level.default': 'error', baseDir, ...overrides },
  }));
  const sql = postgres(url, { max: 2, onnotice: () => undefined });
  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${kiln.url}/api/v1${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-forwarded-for': '203.0.113.9' }, body: JSON.stringify(body) });
    if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
    return ((await res.json()) as { message: unknown }).message;
  };
  const user = (await post('/auth/basic/register', { username: 'bench', name: 'Bench', email: 'bench@example.test', password: 'bench-password-1' })) as { id: string };
  const token = (await post('/auth/basic/login', { loginname: 'bench', password: 'bench-password-1' })) as string;
  const box = await openSecretBox(sql, { baseDir, 'secrets.cryptFile': null });
  return {
    kiln, sql, baseDir, token, statements,
    async createCache(name) {
      const key = generateCacheKey(box, 'bench', name);
      await sql`insert into caches (name, public, owner_id, key_name, public_key, secret_key)
                values (${name}, true, ${user.id}, ${key.key_name}, ${key.public_key}, ${key.secret_key})`;
    },
    async stop() {
      await kiln.stop();
      await statements?.close();
      await sql.end();
      // BENCH_KEEP_DB=1 leaves the database for EXPLAIN (drop it by hand)
      if (process.env['BENCH_KEEP_DB']) console.log(`kept database ${dbName}`);
      else await admin.unsafe(`drop database ${dbName} with (force)`);
      await admin.end();
      await rm(baseDir, { recursive: true, force: true });
    },
  };
}
