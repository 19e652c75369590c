// The embedded PostgreSQL (localDb.enable), run for real. As root, this also covers the server
// running as the postgres account out of a 0700 directory such as `mktemp -d` makes.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import t from 'tap';
import { openDatabase, startLocalDb } from '../../../storage/index.js';
import { captureLog } from '../fixtures/captureLog.js';
import { dbConfig } from '../fixtures/dbConfig.js';
import { eventually } from '../../support/eventually.js';

const asRoot = process.getuid?.() === 0;
const baseDir = await mkdtemp(join(tmpdir(), 'kiln-localdb-'));
const dataDir = join(baseDir, 'postgres', 'data');
const settings = { shared_buffers: '16MB' };

const postmasterPid = async (): Promise<number | undefined> => {
  const text = await readFile(join(dataDir, 'postmaster.pid'), 'utf8').catch(() => undefined);
  return text === undefined ? undefined : Number(text.split('\n')[0]);
};
// Running, and not a zombie: an exited server can linger unreaped where PID 1 is a container's
// own process, so kill(pid, 0) alone would call it alive.
const alive = async (pid: number): Promise<boolean> => {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  return stat !== '' && !/^\d+ \(.*\) Z/.test(stat);
};
// A stopped server removes its lock file a moment before its process ends.
const gone = async (pid: number | undefined): Promise<boolean> =>
  pid === undefined || eventually(async () => !(await alive(pid)), { interval: 10 }).catch(() => false);

t.teardown(async () => {
  // Whatever a failed test left running: SIGINT is PostgreSQL's fast shutdown.
  const pid = await postmasterPid();
  if (pid !== undefined && (await alive(pid))) {
    process.kill(pid, 'SIGINT');
    await gone(pid);
  }
  await rm(baseDir, { recursive: true, force: true });
});

t.test('localDb.enable: an empty 0700 baseDir gets a running, tuned, migrated PostgreSQL that close() stops', async (t) => {
  t.equal((await stat(baseDir)).mode & 0o777, 0o700, 'starts as mktemp -d makes it');
  const { log, messages } = captureLog();
  const db = await openDatabase(dbConfig({ baseDir, 'localDb.enable': true }), log, { urlIsDefault: true });
  t.match(db.url, /^postgres:\/\/kiln:[0-9a-f]{48}@127\.0\.0\.1:\d+\/kiln$/);
  const [settingsNow] = await db.web<Record<string, string>[]>`
    select current_setting('random_page_cost') as rpc, current_setting('max_connections') as conns,
           current_setting('max_locks_per_transaction') as locks, current_setting('shared_buffers') as sb,
           current_setting('work_mem') as wm, current_setting('listen_addresses') as listen,
           current_setting('unix_socket_directories') as sockets`;
  t.same(settingsNow, { rpc: '1.1', conns: '200', locks: '1024', sb: '16MB', wm: '4MB', listen: '127.0.0.1', sockets: '' });
  await db.web`insert into instance_secrets (name, value) values ('kept', ${Buffer.from('across restarts')})`;
  t.notOk(messages('warn').some((m) => m.includes('max_locks_per_transaction')), 'no lock warning on the embedded server');
  if (asRoot) {
    t.equal((await stat(dataDir)).uid, Number((await readFile('/etc/passwd', 'utf8')).match(/^postgres:[^:]*:(\d+):/m)?.[1]), 'the cluster belongs to postgres');
    t.equal((await stat(baseDir)).mode & 0o777, 0o701, 'the baseDir gained search permission for others, nothing more');
    t.ok(messages('warn').some((m) => m.startsWith('gave others search permission (o+x)')));
  }
  t.equal((await stat(join(baseDir, 'postgres', 'password'))).mode & 0o777, 0o600);
  const pid = await postmasterPid();
  await db.close();
  t.equal(await postmasterPid(), undefined, 'the server is stopped');
  t.ok(await gone(pid));
});

t.test('a restart on the same directory keeps the data', async (t) => {
  const { log, messages } = captureLog();
  const local = await startLocalDb({ baseDir, settings, log });
  t.notOk(messages('info').includes('created the embedded PostgreSQL cluster'), 'no second initdb');
  const sql = postgres(local.url, { max: 1 });
  const [row] = await sql<{ value: Buffer }[]>`select value from instance_secrets where name = 'kept'`;
  t.equal(row?.value.toString(), 'across restarts');
  await sql.end();
  await local.stop();
  await local.stop(); // twice is harmless
});

t.test('a kiln killed with SIGKILL leaves its server running; the next start stops it and takes over', async (t) => {
  const fixture = fileURLToPath(new URL('../fixtures/holdLocalDb.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', fixture, baseDir], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => void child.kill('SIGKILL'));
  const [line] = (await once(createInterface({ input: child.stdout }), 'line')) as [string];
  const held = JSON.parse(line) as { url: string; pid: number };
  const leftover = await postmasterPid();
  t.ok(leftover !== undefined && (await alive(leftover)));

  await t.rejects(startLocalDb({ baseDir, settings, log: captureLog().log }), {
    message: new RegExp(`belongs to another kiln process \\(pid ${held.pid}\\) that is still running`),
  }, 'while that kiln lives, another one leaves its server alone');

  child.kill('SIGKILL');
  await once(child, 'exit');
  t.ok(leftover !== undefined && (await alive(leftover)), 'SIGKILL of kiln does not stop its PostgreSQL');

  const { log, messages } = captureLog();
  const local = await startLocalDb({ baseDir, settings, log });
  t.ok(messages('warn').some((m) => m.startsWith('stopping an embedded PostgreSQL server left running')));
  t.ok(await gone(leftover), 'the leftover server is gone');
  const sql = postgres(local.url, { max: 1 });
  t.equal((await sql<{ n: number }[]>`select count(*)::int as n from instance_secrets where name = 'kept'`)[0]?.n, 1);
  await sql.end();

  // The same within one process: a handle dropped without stop() is taken over too,
  // and its late stop() leaves the new server alone.
  const again = await startLocalDb({ baseDir, settings, log });
  t.not(again.port, local.port);
  await local.stop();
  const still = postgres(again.url, { max: 1 });
  t.same(await still`select 1 as one`, [{ one: 1 }]);
  await still.end();
  await again.stop();
});

t.test('a lock file whose pid is not PostgreSQL (reused after a reboot) is cleared', async (t) => {
  // This test's own pid: alive, but node, not postgres.
  await writeFile(join(dataDir, 'postmaster.pid'), `${process.pid}\n${dataDir}\n0\n5432\n`);
  const local = await startLocalDb({ baseDir, settings, log: captureLog().log });
  t.not(await postmasterPid(), process.pid);
  await local.stop();
});

t.test('a fixed port that is taken fails naming the port and quoting the server log', async (t) => {
  // 127.0.0.1:5432 is the test PostgreSQL's.
  await t.rejects(startLocalDb({ baseDir, port: 5432, settings, log: captureLog().log }), {
    message: /PostgreSQL did not start \(localDb\.port is 5432\); its log .*server\.log says:\n[^]*could not bind/,
  });
  t.equal(await postmasterPid(), undefined);
});
