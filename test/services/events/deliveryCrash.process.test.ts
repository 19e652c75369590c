import t, { type Test } from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { testDatabase } from '../../support/db.js';
import { freePort } from '../../support/kiln.js';
import { freshAddress } from '../../support/accounts.js';
import { eventually, startReceiver } from '../../support/events.js';

// A server killed (SIGKILL) after committing events and while delivering them: the next server on
// the same database takes the interrupted attempts back at once (their process's lease is gone)
// and delivers every delivery exactly once more, under the same X-Service-Delivery id.

const bin = fileURLToPath(new URL('../../../bin/kiln.js', import.meta.url));

interface Server {
  url: string;
  child: ChildProcess;
  exited: Promise<number | null>;
}

async function serve(t: Test, databaseUrl: string, baseDir: string): Promise<Server> {
  const port = await freePort();
  const child = spawn(process.execPath, [bin, 'serve', '--port', String(port), '--no-use-tls'], {
    env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '/root', SERVICE_DATABASE_URL: databaseUrl, SERVICE_BASE_DIR: baseDir, SERVICE_LOG_LEVEL_DEFAULT: 'error', SERVICE_OUTBOUND_ALLOWED_NETWORKS: '127.0.0.0/8,::1/128' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
  });
  const url = `http://127.0.0.1:${port}`;
  await eventually(`kiln serve answers (output: ${output.slice(-500)})`, async () =>
    (await fetch(`${url}/api/v1/health`).then((r) => r.ok, () => false)) ? true : undefined, 60_000);
  return { url, child, exited };
}

async function call<T>(server: Server, method: string, path: string, token: string | null, body?: unknown): Promise<T> {
  const res = await fetch(`${server.url}/api/v1${path}`, {
    method,
    headers: { ...freshAddress(), ...(token ? { authorization: `Bearer ${token}` } : {}) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const json = (await res.json()) as { message: T };
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json.message;
}

t.test('killed between commit and delivery: delivered after the restart, exactly once per delivery id', { timeout: 120_000 }, async (t) => {
  const { url: databaseUrl, sql } = await testDatabase(t);
  const baseDir = mkdtempSync(join(tmpdir(), 'kiln-crash-'));
  t.teardown(() => rmSync(baseDir, { recursive: true, force: true }));
  const receiver = await startReceiver(t);
  receiver.mode = 'hang';

  const first = await serve(t, databaseUrl, baseDir);
  await call(first, 'POST', '/auth/basic/register', null, { username: 'ada', name: 'Ada', email: 'ada@example.test', password: 'correct horse' });
  const token = await call<string>(first, 'POST', '/auth/basic/login', null, { loginname: 'ada', password: 'correct horse' });
  await call(first, 'PUT', '/orgs', token, { name: 'acme' });
  await call(first, 'PUT', '/projects/acme', token, { name: 'web', repository: 'https://git.example/web.git' });
  const hook = await call<{ id: string }>(first, 'PUT', '/admin/webhooks', token, { url: receiver.url });
  // Three durable events (task.action.create), committed and queued for the instance webhook …
  for (const name of ['a1', 'a2', 'a3']) {
    await call(first, 'PUT', '/tasks/web/default/actions', token, { kind: 'send_mail', name, to: ['ops@example.test'] });
  }
  // … and a ping, attempted inline; the receiver never answers any of them.
  const ping = fetch(`${first.url}/api/v1/admin/webhooks/${hook.id}/test`, { method: 'POST', headers: { authorization: `Bearer ${token}` } }).catch(() => null);
  await receiver.waitFor(4);
  const committed = await sql<{ id: string }[]>`select id from event_deliveries order by id`;
  t.equal(committed.length, 4, 'four deliveries were committed');
  const inFlight = await sql<{ n: number }[]>`select count(*)::int as n from event_deliveries where status = 'attempting'`;
  t.equal(inFlight[0]!.n, 4, 'all four are being attempted when the server dies');

  first.child.kill('SIGKILL');
  await first.exited;
  await ping;
  await receiver.stop(); // the hung requests die with their connections
  receiver.mode = 200;
  await receiver.start();

  await serve(t, databaseUrl, baseDir);
  await eventually('every delivery delivered', async () => {
    const [row] = await sql<{ n: number }[]>`select count(*)::int as n from event_deliveries where status = 'delivered'`;
    return row!.n === 4 ? true : undefined;
  });
  const byId = new Map<string, number[]>();
  for (const r of receiver.requests) {
    const id = r.headers['x-service-delivery'] as string;
    byId.set(id, [...(byId.get(id) ?? []), r.answered]);
  }
  t.same([...byId.keys()].sort(), committed.map((c) => c.id), 'the receiver saw exactly the committed delivery ids');
  for (const [id, answers] of byId) {
    t.same(answers, [0, 200], `${id}: one unanswered attempt before the kill, one delivery after the restart`);
  }
  const attempts = await sql<{ attempt: number; error: string | null; response_status: number | null }[]>`
    select attempt, error, response_status from event_delivery_attempts order by delivery_id, attempt`;
  t.same(attempts.map((a) => [a.attempt, a.response_status]), committed.flatMap(() => [[1, null], [2, 200]]));
  t.ok(attempts.filter((a) => a.attempt === 1).every((a) => /^interrupted/.test(a.error ?? '')), 'the first attempts are recorded as interrupted');
});
