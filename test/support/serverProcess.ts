// A real `kiln serve` child process for crash tests: started on a test database, killed with
// SIGKILL (no shutdown code runs), started again on the same database and base directory.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { eventually } from './eventually.js';

const bin = fileURLToPath(new URL('../../bin/kiln.js', import.meta.url));
const START_BOUND_MS = 90_000;

export interface ServerProcess {
  url: string;
  port: number;
  child: ChildProcess;
  exited: Promise<unknown>;
  /** Resolves once the process has written `text` to stdout or stderr. */
  printed(text: string): Promise<void>;
}

/** Starts `kiln serve` and waits for /api/v1/health; `flags` are more command-line options, `env` more variables. */
export async function startServerProcess(databaseUrl: string, baseDir: string, port: number, flags: string[] = [], env: Record<string, string> = {}): Promise<ServerProcess> {
  const child = spawn(process.execPath, [bin, 'serve', '--port', String(port), '--base-dir', baseDir, ...flags], {
    env: {
      PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '/root', SERVICE_DATABASE_URL: databaseUrl,
      SERVICE_LOG_LEVEL_DEFAULT: 'warn', SERVICE_USE_TLS: 'false',
      // As test servers in the test process (test/support/kiln.ts testHttpThreads).
      ...(process.env['KILN_TEST_HTTP_THREADS'] === 'default' ? {} : { SERVICE_HTTP_THREADS: process.env['KILN_TEST_HTTP_THREADS'] || '1' }), SERVICE_OUTBOUND_ALLOWED_NETWORKS: '127.0.0.0/8,::1/128', SERVICE_PROJECTS_ALLOW_LOCAL_REPOSITORIES: 'true',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const waiting: { text: string; resolve: () => void }[] = [];
  const took = (d: Buffer) => {
    output += d.toString();
    for (const w of waiting.filter((w) => output.includes(w.text))) waiting.splice(waiting.indexOf(w), 1)[0]!.resolve();
  };
  child.stdout!.on('data', took);
  child.stderr!.on('data', took);
  const printed = (text: string) => (output.includes(text) ? Promise.resolve() : new Promise<void>((resolve) => waiting.push({ text, resolve })));
  const exited = new Promise((r) => child.on('exit', r));
  const url = `http://127.0.0.1:${port}`;
  const healthy = () => fetch(`${url}/api/v1/health`).then((r) => r.ok, () => false);
  // A bound, not a timing: the first start of a fresh clone has tsx transform every module (its
  // cache is empty), on a machine running two other test files; an exit ends the wait at once.
  const state = await eventually(async () => ((await healthy()) ? 'up' : child.exitCode !== null && 'exited'), { timeout: START_BOUND_MS, interval: 100 }).catch(() => `silent for ${START_BOUND_MS / 1000} s`);
  if (state === 'up') return { url, port, child, exited, printed };
  child.kill('SIGKILL');
  throw new Error(`kiln serve did not come up (${state}): ${output.slice(-3000)}`);
}

/** kill -9, and wait until the process is gone. */
export async function killServerProcess(server: ServerProcess): Promise<void> {
  server.child.kill('SIGKILL');
  await server.exited;
}

/** Registers an account over REST and logs it in; the first account of a database is the superuser. */
export async function registerAndLogin(url: string, username: string): Promise<{ id: string; token: string }> {
  const password = `pw-${username}-secret-long`;
  const post = (path: string, body: unknown) =>
    fetch(`${url}/api/v1${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const registered = await post('/auth/basic/register', { username, name: username, email: `${username}@example.test`, password });
  if (registered.status !== 200) throw new Error(`register ${username}: ${registered.status} ${await registered.text()}`);
  const { message: account } = (await registered.json()) as { message: { id: string } };
  const login = await post('/auth/basic/login', { loginname: username, password });
  return { id: account.id, token: ((await login.json()) as { message: string }).message };
}
