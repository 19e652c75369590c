// log.level.* on a running server (docs/metrics.md, "Logs"): the HTTP server logs with the web
// component's level, not the default's (its "listening" line at info shows it), and with the
// default at warn no other component logs below warn. The cache, proto and scheduler components
// are made to log an info line each (the upkeep's rollup pass deleting an expired sample, the
// server closing a worker's connection, the scheduler losing that worker), which shows at info and
// not at error, whatever the default says.
import { randomUUID } from 'node:crypto';
import argon2 from 'argon2';
import t, { type Test } from 'tap';
import { createLogger, loadConfig } from '../../config/index.js';
import { eventually, within } from '../support/eventually.js';
import { startTestKiln, type TestKiln } from '../support/kiln.js';
import { insertProject } from '../support/modelRows.js';
import { handshake, testHello } from '../support/protoClient.js';

interface Line { level: number; component?: string; msg: string }

async function linesOf(t: Pick<Test, 'teardown'>, overrides: Record<string, string | number>, exercise?: (kiln: TestKiln) => Promise<void>): Promise<Line[]> {
  const lines: Line[] = [];
  const config = loadConfig({ scope: 'server', env: {}, overrides }).values;
  const log = createLogger(config, { destination: { write: (l: string) => void lines.push(JSON.parse(l) as Line) } });
  const kiln = await startTestKiln(t, overrides, { log });
  await fetch(`${kiln.url}/api/v1/health`);
  await exercise?.(kiln);
  await kiln.upkeep.settle();
  return lines;
}

/** One info line from each of cache, proto and scheduler, each written before this returns. */
async function exerciseComponents(kiln: TestKiln): Promise<void> {
  // cache (the upkeep): the rollup pass deletes a phase sample past metrics.retention.rawDays and says so.
  await kiln.sql`insert into phase_samples (kind, phase, ended_at, duration_ms) values ('build', 'run', now() - interval '30 days', 1)`;
  await eventually(async () => (await kiln.sql`select 1 from phase_samples`).count === 0, { message: 'the rollup pass deletes the expired sample' });
  await kiln.upkeep.settle(); // its line follows the delete in the same pass

  // proto and scheduler: a registered worker is welcomed, then sends garbage; the server closes it
  // (proto's line, written before the close frame) and the scheduler loses it (its line, written
  // before the later listener below hears of the loss).
  const projectId = await insertProject(kiln.sql, 'acme', `levels-${randomUUID().slice(0, 8)}`);
  const token = 'c'.repeat(64);
  await kiln.sql`insert into worker_registrations (project_id, token_hash) values (${projectId}, ${await argon2.hash(token, { type: argon2.argon2id })})`;
  const lost = new Promise<void>((resolve) => {
    const off = kiln.workers.subscribe({ connected: () => undefined, received: () => undefined, lost: () => (off(), resolve()) });
  });
  const client = await handshake(`ws://127.0.0.1:${kiln.port}/proto`, testHello({ open: false }), [{ project: projectId, token }]);
  await client.next('welcome');
  // The ack comes once the connection is established, so the loss below is the scheduler's.
  client.send({ t: 'heartbeat', seq: 1, load: { runningBuilds: 0, runningEvals: 0, load1: 0, memoryFreeBytes: 1, memoryTotalBytes: 2, storeFreeBytes: null } });
  await client.next('heartbeatAck');
  client.sendRaw(Buffer.from([0xc1, 0xff, 0x00]));
  const closed = await client.closed;
  if (closed.code !== 4002) throw new Error(`the server closed the worker with ${closed.code} ${closed.reason}, not malformed_message`);
  await within(lost, 20_000, () => 'the scheduler hears of the lost worker');
}

const COMPONENT_LINES = { cache: /metric-rollup pass done/, proto: /closing a \/proto connection/, scheduler: /worker lost/ } as const;

t.test('log.level.web info under a default of warn: the web lines, and no other component below warn', async (t) => {
  const lines = await linesOf(t, { 'log.level.default': 'warn', 'log.level.web': 'info' });
  t.same(lines.filter((l) => l.level < 40 && l.component !== 'web').map((l) => `${l.component}: ${l.msg}`), []);
  t.ok(lines.some((l) => l.component === 'web' && l.level === 30 && /listening/.test(l.msg)), 'web\'s info line');
});

t.test('log.level.web error under a default of info: web\'s info line is gone', async (t) => {
  const lines = await linesOf(t, { 'log.level.default': 'info', 'log.level.web': 'error' });
  t.notOk(lines.some((l) => l.component === 'web' && l.level < 50), 'nothing of web below error');
});

t.test('log.level.cache, .proto and .scheduler at info under a default of warn: each one\'s info line', async (t) => {
  const lines = await linesOf(t, {
    'log.level.default': 'warn', 'log.level.cache': 'info', 'log.level.proto': 'info', 'log.level.scheduler': 'info', 'metrics.rollupIntervalSecs': 1,
  }, exerciseComponents);
  for (const [component, message] of Object.entries(COMPONENT_LINES)) {
    t.ok(lines.some((l) => l.component === component && l.level === 30 && message.test(l.msg)), `${component}'s info line`);
  }
  t.same(lines.filter((l) => l.level < 40 && !(l.component !== undefined && l.component in COMPONENT_LINES)).map((l) => `${l.component}: ${l.msg}`), [], 'no other component below warn');
});

t.test('log.level.cache, .proto and .scheduler at error under a default of info: their info lines are gone', async (t) => {
  const lines = await linesOf(t, {
    'log.level.default': 'info', 'log.level.cache': 'error', 'log.level.proto': 'error', 'log.level.scheduler': 'error', 'metrics.rollupIntervalSecs': 1,
  }, exerciseComponents);
  for (const component of Object.keys(COMPONENT_LINES)) {
    t.same(lines.filter((l) => l.component === component && l.level < 50).map((l) => l.msg), [], `nothing of ${component} below error`);
  }
  t.ok(lines.some((l) => l.component === 'web' && l.level === 30), 'the default\'s info lines are written');
});
