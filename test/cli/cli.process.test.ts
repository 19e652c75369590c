import t from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { testDatabase } from '../support/db.js';
import { freePort } from '../support/kiln.js';
import { eventually } from '../support/eventually.js';

const bin = fileURLToPath(new URL('../../bin/kiln.js', import.meta.url));
// Only what kiln needs: no SERVICE_* from the machine running the tests.
const cleanEnv = (extra: Record<string, string> = {}) => ({ PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '/root', ...extra });
const kiln = (args: string[], env: Record<string, string> = {}) =>
  spawnSync(process.execPath, [bin, ...args], { env: cleanEnv(env), encoding: 'utf8', timeout: 60_000 });

t.test('config print shows every value with its source, secrets masked', async (t) => {
  const out = kiln(['config', 'print', '--port', '4100'], { SERVICE_DATABASE_URL: 'postgres://kiln:hunter2@db.example/kiln', SERVICE_UPLOAD_CONCURRENCY: '3' });
  t.equal(out.status, 0, out.stderr);
  t.match(out.stdout, /^port\s+4100\s+--port$/m);
  t.match(out.stdout, /upload\.concurrency\s+3\s+.*SERVICE_UPLOAD_CONCURRENCY/);
  t.notMatch(out.stdout, /hunter2/, 'the password is masked');
  t.match(out.stdout, /retentionDays\s+90\s+.*default/);
});

t.test('config check names the problem and fails', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'kiln-cli-'));
  const good = join(dir, 'good.json'), bad = join(dir, 'bad.json');
  await writeFile(good, JSON.stringify({ port: 4000, upload: { concurrency: 4 } }));
  await writeFile(bad, JSON.stringify({ nar: { chunkBytes: 100 }, uplod: {} }));
  t.equal(kiln(['config', 'check', good]).status, 0);
  const out = kiln(['config', 'check', bad]);
  t.equal(out.status, 1);
  t.match(out.stderr, /nar\.chunkBytes=100 .*must be an integer from 4096 to 4194304/);
  t.match(out.stderr, /uplod/);
});

t.test('serve refuses a bad option before starting anything', async (t) => {
  const out = kiln(['serve'], { SERVICE_NAR_CHUNK_BYTES: '100' });
  t.equal(out.status, 2);
  t.match(out.stderr, /nar\.chunkBytes=100 from SERVICE_NAR_CHUNK_BYTES: must be an integer from 4096 to 4194304/);
});

t.test('migrate applies once, then has nothing to do', async (t) => {
  const { url } = await testDatabase(t, { migrated: false });
  const first = kiln(['migrate'], { SERVICE_DATABASE_URL: url, SERVICE_LOG_LEVEL_DEFAULT: 'error' });
  t.equal(first.status, 0, first.stderr);
  t.match(first.stdout, /applied: 0001_foundation\.sql/);
  const second = kiln(['migrate'], { SERVICE_DATABASE_URL: url, SERVICE_LOG_LEVEL_DEFAULT: 'error' });
  t.match(second.stdout, /up to date/);
});

t.test('serve on embedded PostgreSQL from an empty 0700 baseDir, then a graceful SIGTERM', async (t) => {
  const baseDir = await mkdtemp(join(tmpdir(), 'kiln-serve-')); // mkdtemp makes it 0700
  const port = await freePort();
  const child = spawn(process.execPath, [bin, 'serve', '--config', 'kiln.dev.json', '--port', String(port), '--base-dir', baseDir], {
    env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  const healthy = await eventually(() => fetch(`http://127.0.0.1:${port}/api/v1/health`).then((r) => r.ok, () => false),
    { timeout: 30_000, interval: 250 }).catch(() => false);
  t.ok(healthy, `health answered (output: ${output.slice(-2000)})`);
  child.kill('SIGTERM');
  t.equal(await exited, 0, 'exits 0 after draining');
  t.match(output, /shutting down/);
  const running = spawnSync('pgrep', ['-f', `${baseDir}/postgres/data`], { encoding: 'utf8' });
  t.equal(running.stdout.trim(), '', 'the embedded PostgreSQL stopped with it');
  t.notOk(await fetch(`http://127.0.0.1:${port}/api/v1/health`).then(() => true, () => false), 'nothing listens any more');
});
