// A whole kiln server in-process, on a fresh test database and a temporary baseDir, on a free port.
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Sql } from 'postgres';
import type { Test } from 'tap';
import { loadConfig, type OptionPath } from '../../config/index.js';
import { startKiln, type Kiln, type StartKilnOptions } from '../../cli/kiln.js';
import { testDatabase } from './db.js';
import { rememberServerBaseDir } from './caches.js';

export interface TestKiln extends Kiln {
  /** a small pool on the test database, for assertions on rows */
  sql: Sql;
  baseDir: string;
  /** JSON call through the real HTTP API: `api('PUT', '/caches', { token, body })` */
  api<T = unknown>(method: string, path: string, opts?: { token?: string; body?: unknown; headers?: Record<string, string> }): Promise<ApiResult<T>>;
}

export interface ApiResult<T> {
  status: number;
  headers: Headers;
  /** the envelope's message (payload on success, text on error) */
  message: T;
  error: boolean;
  code?: string;
}

/** outbound.allowedNetworks of test servers: their webhook receivers and upstreams are on this host */
export const LOOPBACK_NETWORKS = ['127.0.0.0/8', '::1/128'];

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/**
 * The serving threads of a test server (docs/http.md, "Serving threads", "In tests"): one event
 * loop unless KILN_TEST_HTTP_THREADS says otherwise (a count, or `default` for the option's own
 * default) or the test asks. Three test files run at once on two cores: threads in every server of
 * every file would multiply start-up work and memory for nothing most tests look at.
 */
export function testHttpThreads(): { 'http.threads'?: number } {
  const asked = process.env['KILN_TEST_HTTP_THREADS'];
  if (asked === 'default') return {};
  return { 'http.threads': asked ? Number(asked) : 1 };
}

export async function startTestKiln(t: Pick<Test, 'teardown'>, overrides: Partial<Record<OptionPath, unknown>> = {}, options: StartKilnOptions = {}): Promise<TestKiln> {
  const { url, sql } = await testDatabase(t);
  const baseDir = await mkdtemp(join(tmpdir(), 'kiln-test-'));
  const port = await freePort();
  const loaded = loadConfig({
    scope: 'server',
    env: {},
    overrides: {
      'database.url': url,
      'database.minConnections': 0,
      'database.cache.minConnections': 0,
      'database.web.minConnections': 0,
      // Test files run in parallel against one PostgreSQL (max_connections 100 by default): small pools.
      'database.maxConnections': 5,
      'database.cache.maxConnections': 4,
      'database.web.maxConnections': 4,
      baseDir,
      port,
      useTls: false,
      'log.level.default': process.env['KILN_TEST_LOG'] ?? 'error',
      // The tests' receivers and upstreams listen on loopback, which kiln refuses by default.
      'outbound.allowedNetworks': LOOPBACK_NETWORKS,
      // Test repositories are local flakes (test/support/flakeRepo.ts); tests of the default set it back to false.
      'projects.allowLocalRepositories': true,
      ...testHttpThreads(),
      ...overrides,
    },
  });
  const kiln = await startKiln(loaded, { gcLoop: false, shrinkHeapAtRest: false, ...options });
  rememberServerBaseDir(sql, baseDir);
  t.teardown(async () => {
    await kiln.stop();
    await rm(baseDir, { recursive: true, force: true });
  });
  return Object.assign(Object.create(null) as object, kiln, { sql, baseDir, api: apiClient(kiln.url) }) as TestKiln;
}

/** JSON calls to the HTTP API of the server at `url` (TestKiln['api']). */
export function apiClient(url: string): TestKiln['api'] {
  return async (method, path, opts = {}) => {
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.token) headers['authorization'] = `Bearer ${opts.token}`;
    const init: RequestInit = { method, headers };
    if (opts.body !== undefined) init.body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
    const res = await fetch(`${url}/api/v1${path}`, init);
    const text = await res.text();
    let json: { error?: boolean; message?: unknown; code?: string } = {};
    try {
      json = JSON.parse(text) as typeof json;
    } catch {
      json = { error: true, message: text };
    }
    return { status: res.status, headers: res.headers, message: json.message as never, error: json.error === true, ...(json.code ? { code: json.code } : {}) };
  };
}
