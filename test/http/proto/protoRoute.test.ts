import t from 'tap';
import { encode } from 'msgpackr';
import { startTestKiln } from '../../support/kiln.js';
import { connectProto, handshake, testHello } from '../../support/protoClient.js';
import { insertProject } from '../../support/modelRows.js';
import { eventually } from '../../support/eventually.js';

t.test('/proto on the real server', async (t) => {
  const kiln = await startTestKiln(t, { localWorker: true, publicStats: true, 'proto.workerHeartbeatTimeoutSecs': 2 });
  const url = `ws://127.0.0.1:${kiln.port}/proto`;
  const projectId = await insertProject(kiln.sql, 'acme', 'app');

  await t.test('an open-mode worker on loopback is welcomed, beats, and is listed', async (t) => {
    const hello = testHello();
    const client = await handshake(url, hello);
    const welcome = await client.next('welcome');
    t.equal(welcome.open, true);
    t.same(welcome.projects, [projectId]);
    t.equal(welcome.limits.heartbeatTimeoutSecs, 2);
    client.send({ t: 'heartbeat', seq: 1, load: { runningBuilds: 0, runningEvals: 0, load1: 0.1, memoryFreeBytes: 1, memoryTotalBytes: 2, storeFreeBytes: null } });
    t.equal((await client.next('heartbeatAck')).seq, 1);
    const listed = await kiln.api<{ id: string; open: boolean }[]>('GET', '/workers');
    t.equal(listed.status, 200);
    t.ok(listed.message.some((w) => w.id === hello.workerId && w.open));

    const twin = await connectProto(url);
    twin.send(hello);
    t.match(await twin.closed, { code: 4014, reason: /^duplicate_worker/ });

    // silence past the (shortened) heartbeat timeout ends the connection with heartbeat_timeout
    t.match(await client.closed, { code: 4016, reason: /^heartbeat_timeout/ });
    // the connection row is updated just after the close frame goes out
    const closeCode = await eventually(async () => {
      const [row] = await kiln.sql<{ close_code: string | null }[]>`select close_code from worker_connections where worker_id = ${hello.workerId}`;
      return row?.close_code;
    }, { interval: 20, message: 'the connection row records its close' });
    t.equal(closeCode, 'heartbeat_timeout');
  });

  await t.test('bad input closes the connection with a reason', async (t) => {
    const garbage = await connectProto(url);
    garbage.sendRaw(Buffer.from([0xc1, 0xff, 0x00]));
    t.match(await garbage.closed, { code: 4002, reason: /^malformed_message/ });

    const text = await connectProto(url);
    text.sendRaw('hello');
    t.match(await text.closed, { code: 4002, reason: /text frames/ });

    const version = await connectProto(url);
    version.sendRaw(encode({ v: 99, t: 'hello' }));
    t.match(await version.closed, { code: 4001, reason: /^unsupported_version/ });

    const oversize = await connectProto(url);
    oversize.sendRaw(Buffer.alloc(2 * 1024 * 1024, 1));
    t.match(await oversize.closed, { code: 1009, reason: /^message_too_large/ });

    const wrongPhase = await connectProto(url);
    wrongPhase.send({ t: 'heartbeat', seq: 1, load: { runningBuilds: 0, runningEvals: 0, load1: 0, memoryFreeBytes: 1, memoryTotalBytes: 2, storeFreeBytes: null } });
    t.match(await wrongPhase.closed, { code: 4004, reason: /^unexpected_message/ });
  });

  await t.test('a registered token verifies; a wrong one is refused', async (t) => {
    const registered = await kiln.sql<{ id: string }[]>`select id from projects where id = ${projectId}`;
    t.equal(registered.length, 1);
    const argon2 = (await import('argon2')).default;
    const token = 'a'.repeat(64);
    await kiln.sql`insert into worker_registrations (project_id, token_hash) values (${projectId}, ${await argon2.hash(token, { type: argon2.argon2id })})`;

    const good = await handshake(url, testHello({ open: false }), [{ project: projectId, token }]);
    t.same((await good.next('welcome')).projects, [projectId]);
    good.close();

    const bad = await handshake(url, testHello({ open: false }), [{ project: projectId, token: 'b'.repeat(64) }]);
    t.match(await bad.closed, { code: 4010, reason: /^bad_token/ });
  });

  await t.test('the server still serves after all that', async (t) => {
    t.equal((await kiln.api('GET', '/health')).status, 200);
    const client = await handshake(url, testHello());
    t.equal((await client.next('welcome')).open, true);
    client.close();
  });
});

t.test('GET /workers needs a superuser without publicStats; open mode needs localWorker', async (t) => {
  const kiln = await startTestKiln(t, { 'proto.maxConnections': 1 });
  const { signUp } = await import('../../support/accounts.js');
  await signUp(kiln, 'root'); // the first account is the superuser
  const { token } = await signUp(kiln, 'eve');
  t.match(await kiln.api('GET', '/workers', { token }), { status: 403, code: 'forbidden' });
  const client = await connectProto(`ws://127.0.0.1:${kiln.port}/proto`);
  client.send(testHello());
  t.match(await client.closed, { code: 4012, reason: /^open_mode_refused/ });

  const first = await connectProto(`ws://127.0.0.1:${kiln.port}/proto`);
  const second = await connectProto(`ws://127.0.0.1:${kiln.port}/proto`);
  t.match(await second.closed, { code: 1013, reason: /^server_full/ });
  first.close();
});
