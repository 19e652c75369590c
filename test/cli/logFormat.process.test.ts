// `kiln worker --log-format`: readable coloured lines on a terminal (a real pseudo-terminal made by
// script(1)), JSON lines when stdout is a pipe or with --log-format json, and a clear refusal of
// another value. `kiln serve` chooses the same way (cli/serveCommand.ts).
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';
import { eventually } from '../support/eventually.js';

const bin = fileURLToPath(new URL('../../bin/kiln.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'kiln-logformat-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const env = { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '/root' };
// A server that is not there: the worker starts, logs, and keeps trying to connect.
const workerArgs = (extra: string[]) => [bin, 'worker', '--base-dir', dir, '--server-url', 'ws://127.0.0.1:1/proto', ...extra];
const quote = (s: string) => `'${s.replaceAll("'", "'\\''")}'`;

/** The worker's output until it said it started; `tty` runs it on a pseudo-terminal. */
async function firstLines(t: Pick<Test, 'teardown'>, extra: string[], tty: boolean): Promise<string> {
  const args = workerArgs(extra);
  const child = tty
    ? spawn('script', ['-qec', [process.execPath, ...args].map(quote).join(' '), '/dev/null'], { env, stdio: ['pipe', 'pipe', 'pipe'] })
    : spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (out += b.toString()));
  t.teardown(() => {
    child.kill('SIGKILL');
  });
  await eventually(() => out.includes('kiln worker started'), { message: 'the worker says it started' });
  child.kill('SIGTERM');
  return out;
}

t.test('a pipe gets JSON lines', async (t) => {
  const out = await firstLines(t, [], false);
  const line = out.split('\n').find((l) => l.includes('kiln worker started'))!;
  t.match(JSON.parse(line), { level: 30, msg: 'kiln worker started' });
});

t.test('a terminal gets readable coloured lines', async (t) => {
  const out = await firstLines(t, [], true);
  t.match(out, /\[\d\d:\d\d:\d\d\.\d{3}\] \x1b\[32mINFO\x1b\[39m: \x1b\[36mkiln worker started/);
  t.notMatch(out, /"level":/);
});

t.test('--log-format json on a terminal gets JSON lines', async (t) => {
  const out = await firstLines(t, ['--log-format', 'json'], true);
  t.match(out, /\{"level":30,.*"msg":"kiln worker started"\}/);
  t.notMatch(out, /\x1b\[/);
});

t.test('another --log-format is refused', async (t) => {
  const out = spawnSync(process.execPath, workerArgs(['--log-format', 'xml']), { env, encoding: 'utf8', timeout: 60_000 });
  t.equal(out.status, 2);
  t.match(out.stderr, /--log-format must be auto, json or pretty, not "xml"/);
});
