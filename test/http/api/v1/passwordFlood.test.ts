import t from 'tap';
import { createHook } from 'node:async_hooks';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { passwordGate } from '../../../../services/index.js';
import { freshAddress, signUp } from '../../../support/accounts.js';
import { startTestKiln } from '../../../support/kiln.js';
import { eventually as boundedWait } from '../../../support/eventually.js';

// Unauthenticated logins must never stall serving: argon2 runs on libuv's thread pool (4 threads by
// default), so the password gate lets one hash at a time reach it. The server runs in this process,
// so the pool these file reads use is the server's. What is checked is what the gate decides, seen
// through async_hooks (argon2's work items on the pool), never how long anything took.

const LIBUV_THREADS = 4; // UV_THREADPOOL_SIZE is not set for tests

/** argon2 work items queued on or running in the libuv pool: from their init until their completion callback. */
function watchArgon2OnThreadPool() {
  const pending = new Set<number>();
  let peak = 0;
  let total = 0;
  const hook = createHook({
    init(id, type) {
      if (type !== 'argon2:HashWorker') return;
      pending.add(id);
      total++;
      peak = Math.max(peak, pending.size);
    },
    before(id) {
      pending.delete(id);
    },
  }).enable();
  return { stop: () => hook.disable(), get peak() { return peak; }, get total() { return total; } };
}

/** Polls `ok` for a minute at most; whether it came true. */
function eventually(ok: () => boolean): Promise<boolean> {
  return boundedWait(ok, { timeout: 60_000, interval: 50 }).catch(() => false);
}

t.test('a burst of wrong-password logins holds at most one libuv thread; file reads go on meanwhile', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  const files = await Promise.all(Array.from({ length: 16 }, async (_, i) => {
    const file = join(kiln.baseDir, `blob-${i}`);
    await writeFile(file, `bytes of blob ${i}`);
    return file;
  }));
  const watch = watchArgon2OnThreadPool();
  t.teardown(() => watch.stop());
  const before = passwordGate.stats();
  const guesses = [...Array.from({ length: 5 }, (_, i) => ['ada', `guess-${i}`]), ['nobody', 'x'], ['ada@example.test', 'y']];
  const logins = guesses.map(([loginname, password]) =>
    kiln.api('POST', '/auth/basic/login', { body: { loginname, password }, headers: freshAddress() }));
  t.ok(await eventually(() => passwordGate.stats().waiting >= 2), 'the logins queue at the gate');
  const read = await Promise.all(files.map((f) => readFile(f, 'utf8')));
  t.equal(read[15], 'bytes of blob 15', 'the file reads completed');
  const queued = passwordGate.stats();
  t.ok(queued.waiting + queued.inFlight > 0, 'they completed while password checks were still queued: none waited behind argon2');
  const answers = await Promise.all(logins);
  watch.stop();
  for (const a of answers) {
    if (a.status === 503) t.match(a, { code: 'password_busy', headers: { get: Function } });
    else t.match(a, { status: 401, code: 'invalid_credentials' });
  }
  t.ok(watch.total >= 1, 'argon2 did run (the watch sees it)');
  t.equal(watch.peak, 1, 'never more than one argon2 work item on the libuv pool');
  t.ok(watch.peak < LIBUV_THREADS, 'the pool always has threads left for file I/O and zlib');
  t.equal(passwordGate.stats().peakInFlight, passwordGate.cap);
  t.equal(passwordGate.stats().refused, before.refused + answers.filter((a) => a.status === 503).length);
  t.equal((await kiln.api('POST', '/auth/basic/login', { body: { loginname: 'ada', password: ada.password }, headers: freshAddress() })).status, 200);
});

t.test('with the queue full, login, registration and a password change answer 503 password_busy with Retry-After', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  // Fill the process's gate with hashes this test holds: one running, maxWaiting queued.
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const holders = Array.from({ length: passwordGate.cap + passwordGate.maxWaiting }, () => passwordGate.run(() => held));
  t.ok(await eventually(() => passwordGate.stats().waiting === passwordGate.maxWaiting), 'the gate is full');
  const busy = { status: 503, error: true, code: 'password_busy', message: /too many password checks/ };
  const login = await kiln.api('POST', '/auth/basic/login', { body: { loginname: 'ada', password: ada.password }, headers: freshAddress() });
  t.match(login, busy);
  t.equal(login.headers.get('retry-after'), '2');
  const register = await kiln.api('POST', '/auth/basic/register', {
    body: { username: 'bob', name: 'Bob', email: 'bob@example.test', password: 'pw-bob-secret-long' }, headers: freshAddress(),
  });
  t.match(register, busy);
  t.equal(register.headers.get('retry-after'), '2');
  t.equal((await kiln.sql`select 1 from users where username = 'bob'`).length, 0, 'no account half-made');
  const change = await kiln.api('PATCH', '/user/settings', { token: ada.token, body: { current_password: ada.password, new_password: 'a-new-long-password' } });
  t.match(change, busy);
  t.equal(change.headers.get('retry-after'), '2');
  release();
  await Promise.all(holders);
  t.equal((await kiln.api('POST', '/auth/basic/login', { body: { loginname: 'ada', password: ada.password }, headers: freshAddress() })).status, 200, 'the old password still works, and logins pass again');
});
