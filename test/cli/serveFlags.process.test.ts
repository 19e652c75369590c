// `kiln serve` runs under the environment and V8 options of bin/serveFlags.js (docs/http.md,
// "Memory at rest"): bin/kiln.js replaces itself with a Node started with them, keeping its process
// id, unless the operator set the variables already.
import { readFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { SERVE_ENV, SERVE_V8_FLAGS } from '../../bin/serveFlags.js';
import { testDatabase } from '../support/db.js';
import { freePort } from '../support/kiln.js';
import { startServerProcess, type ServerProcess } from '../support/serverProcess.js';

const commandLine = async (pid: number) => (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').filter(Boolean);
const environment = async (pid: number) => (await readFile(`/proc/${pid}/environ`, 'utf8')).split('\0').filter(Boolean);

/** `kiln serve` in a process of its own on a fresh database; `env`: more variables. */
async function startServe(t: Test, env: Record<string, string>): Promise<ServerProcess> {
  const db = await testDatabase(t);
  const baseDir = await mkdtemp(join(tmpdir(), 'kiln-flags-'));
  t.teardown(() => rm(baseDir, { recursive: true, force: true }));
  const server = await startServerProcess(db.url, baseDir, await freePort(), [], env);
  t.teardown(() => server.child.kill('SIGKILL'));
  return server;
}

t.test('the server process runs with its environment, in the process it was started as, with its serving threads', async (t) => {
  const server = await startServe(t, { SERVICE_HTTP_THREADS: '2' });
  const argv = await commandLine(server.child.pid!);
  t.equal(argv.filter((a) => a.endsWith('bin/kiln.js')).length, 1, 'bin/kiln.js once: replaced, not started twice');
  const env = await environment(server.child.pid!);
  t.same(Object.entries(SERVE_ENV).filter(([name, value]) => !env.includes(`${name}=${value}`)), [], 'every variable in the environment');
  t.same(SERVE_V8_FLAGS.filter((flag) => argv.indexOf(flag) < 0 || argv.indexOf(flag) > argv.findIndex((a) => a.endsWith('bin/kiln.js'))), [], "every V8 option, as Node's own");
  // the port is the serving threads' (the main thread listens on loopback only)
  for (let i = 0; i < 4; i++) t.equal((await fetch(`${server.url}/cache/none/nix-cache-info`)).status, 404);
});

t.test("the operator's own environment stands", async (t) => {
  const server = await startServe(t, { MALLOC_ARENA_MAX: '4' });
  t.ok((await environment(server.child.pid!)).includes('MALLOC_ARENA_MAX=4'));
});
