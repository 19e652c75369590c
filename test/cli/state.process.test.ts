import t from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { testDatabase } from '../support/db.js';
import { freePort } from '../support/kiln.js';
import { eventually } from '../support/eventually.js';
import { fullState, writeStateFile } from '../support/stateFixture.js';

const bin = fileURLToPath(new URL('../../bin/kiln.js', import.meta.url));
const cleanEnv = (extra: Record<string, string> = {}) => ({ PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '/root', ...extra });

t.test('kiln state check validates without a database', async (t) => {
  const { dir } = writeStateFile({});
  const { file } = writeStateFile(fullState(dir), dir);
  const ok = spawnSync(process.execPath, [bin, 'state', 'check', file], { env: cleanEnv(), encoding: 'utf8', timeout: 60_000 });
  t.equal(ok.status, 0, ok.stderr);
  t.match(ok.stdout, /is valid: 2 users, 1 organizations, 1 projects, 2 caches, 3 memberships, 2 subscriptions, 1 API keys/);
  const broken = writeStateFile({ projects: [{ organization: 'ghost', name: 'web', repository: 'https://x' }] }).file;
  const bad = spawnSync(process.execPath, [bin, 'state', 'check', broken], { env: cleanEnv(), encoding: 'utf8', timeout: 60_000 });
  t.equal(bad.status, 1);
  t.match(bad.stderr, /projects\.0\.organization: organization "ghost" is not declared in this file/);
});

t.test('kiln serve --state-file applies it before serving', async (t) => {
  const { url } = await testDatabase(t);
  const { dir } = writeStateFile({});
  const { file } = writeStateFile(fullState(dir), dir);
  const port = await freePort();
  const child = spawn(process.execPath, [bin, 'serve', '--state-file', file, '--port', String(port), '--no-use-tls'], {
    env: cleanEnv({ SERVICE_DATABASE_URL: url, SERVICE_BASE_DIR: dir, SERVICE_LOG_LEVEL_DEFAULT: 'error' }), stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  t.teardown(async () => {
    if (child.exitCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
  });
  const healthy = await eventually(() => fetch(`http://127.0.0.1:${port}/api/v1/health`).then((r) => r.ok, () => false),
    { until: (ok) => ok || child.exitCode !== null, timeout: 30_000, interval: 250 }).catch(() => false);
  t.ok(healthy, `health answered (output: ${output.slice(-2000)})`);
  const login = await fetch(`http://127.0.0.1:${port}/api/v1/auth/basic/login`, {
    method: 'POST', body: JSON.stringify({ loginname: 'ada', password: 'correct horse battery' }),
  });
  t.equal(login.status, 200, 'the declared user signs in with the password from its file');
  const token = ((await login.json()) as { message: string }).message;
  const org = await fetch(`http://127.0.0.1:${port}/api/v1/orgs/acme`, { headers: { authorization: `Bearer ${token}` } });
  t.match(await org.json(), { message: { name: 'acme', state_managed: true, role: 'Admin' } });
});
