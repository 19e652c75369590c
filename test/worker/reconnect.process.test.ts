// A real `kiln worker` process and the handshake's endings: a bad token, open mode accepted and
// refused, and a server that dies and comes back on the same port.
import t from 'tap';
import { randomBytes, randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '../support/nixStore.js';
import { startProtoServer } from '../support/protoServer.js';
import { spawnWorker, type LogLine } from '../support/workerProcess.js';

const dir = tempDir('kiln-worker-reconnect-');
const project = randomUUID();
const token = randomBytes(48).toString('base64url');
const peersFile = join(dir, 'peers');
writeFileSync(peersFile, `*:${token}\n`);

const refused = (code: string) => (line: LogLine) => line.msg === 'the server refused this worker' && line['code'] === code;

t.test('a bad token: the server closes with bad_token, the worker says so and retries', async (t) => {
  const server = await startProtoServer({ tokens: { [project]: [randomBytes(48).toString('base64url')] } });
  const worker = spawnWorker({ serverUrl: server.url, baseDir: join(dir, 'bad-token'), peersFile });
  t.teardown(async () => {
    await worker.stop();
    await server.close();
  });
  const closed = await server.nextClose();
  t.equal(closed.code, 4010);
  t.match(closed.reason, /^bad_token: /);
  t.ok(closed.hello, 'the worker got as far as its hello');
  await worker.waitForLog(refused('bad_token'));
  const second = await server.nextClose();
  t.equal(second.code, 4010, 'it tries again after a delay');
});

t.test('open mode: a worker without a peers file', async (t) => {
  const open = await startProtoServer({ openModeProjects: [project] });
  const closedServer = await startProtoServer({});
  const accepted = spawnWorker({ serverUrl: open.url, baseDir: join(dir, 'open') });
  const refusedWorker = spawnWorker({ serverUrl: closedServer.url, baseDir: join(dir, 'open-refused') });
  t.teardown(async () => {
    await accepted.stop();
    await refusedWorker.stop();
    await open.close();
    await closedServer.close();
  });
  const session = await open.nextWorker();
  t.equal(session.hello.open, true);
  t.same(session.projects, [project]);
  const closed = await closedServer.nextClose();
  t.equal(closed.code, 4012);
  t.match(closed.reason, /^open_mode_refused: /);
  await refusedWorker.waitForLog(refused('open_mode_refused'));
});

t.test('the server dies: the worker reconnects with growing delays, then resumes', async (t) => {
  const first = await startProtoServer({ tokens: { [project]: [token] } });
  const worker = spawnWorker({ serverUrl: first.url, baseDir: join(dir, 'reconnect'), peersFile });
  t.teardown(() => worker.stop());
  const session = await first.nextWorker();
  const port = first.port;
  await first.kill();
  await session.closed;
  // Nothing listens now: wait for the worker to have waited twice, then bring the server back.
  const delays: number[] = [];
  for (let attempt = 1; attempt <= 2; attempt++) {
    const line = await worker.waitForLog((l) => l.msg === 'reconnecting after a delay' && l['attempt'] === attempt);
    delays.push(Number(line['delayMs']));
  }
  t.ok(delays[0]! < delays[1]!, `the delays grow: ${delays.join(', ')} ms`);
  t.ok(delays.every((d) => d <= 60_000), 'and stay within 60 s');
  const second = await startProtoServer({ port, tokens: { [project]: [token] } });
  t.teardown(() => second.close());
  const again = await second.nextWorker();
  t.equal(again.hello.workerId, session.hello.workerId, 'the same worker, with its id from <baseDir>/worker-id');
  await again.next('heartbeat');
});
