// worker.discoverable end to end: a real `kiln worker` listens, the server dials the endpoint of
// its registration with the server token the worker's worker.acceptedServerTokensFile accepts,
// the usual handshake runs (the worker still proves itself with its peer token), and the worker
// shows up connected. Wrong or missing server tokens are refused before the upgrade. The server
// runs with proto.discoverable off: it refuses incoming /proto connections and still dials.
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { WebSocket } from 'ws';
import { startTestKiln, freePort } from '../support/kiln.js';
import { signUp } from '../support/accounts.js';
import { tempDir } from '../support/nixStore.js';
import { spawnWorker } from '../support/workerProcess.js';
import { eventually } from '../support/eventually.js';
import { connectProto, testHello } from '../support/protoClient.js';
import { parseAcceptedServerTokens, serverTokenAccepted } from '../../worker/serverTokens.js';

const upgradeStatus = (url: string, headers: Record<string, string>) => new Promise<number>((resolve) => {
  const socket = new WebSocket(url, { headers });
  socket.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
  socket.on('open', () => {
    socket.close();
    resolve(101);
  });
  socket.on('error', () => resolve(-1));
});

t.test('the server connects to a discoverable worker', async (t) => {
  const kiln = await startTestKiln(t, { 'proto.discoverable': false, localWorker: true });
  const incoming = await connectProto(`ws://127.0.0.1:${kiln.port}/proto`);
  incoming.send(testHello());
  t.match(await incoming.closed, { code: 4003, reason: /^not_discoverable/ }, 'an incoming worker is refused');
  const { token } = await signUp(kiln, 'ada');
  await kiln.api('PUT', '/orgs', { token, body: { name: 'acme' } });
  await kiln.api('PUT', '/projects/acme', { token, body: { name: 'app', repository: 'file:///nonexistent' } });
  const [project] = await kiln.sql<{ id: string }[]>`select id from projects where name = 'app'`;

  const port = await freePort();
  const serverToken = 'server-token-for-the-discoverable-worker-0123456789';
  const bad = await kiln.api('POST', '/projects/app/workers', { token, body: { server_token: serverToken } });
  t.match(bad, { status: 400 }, 'a server token without an endpoint is refused');
  const badUrl = await kiln.api('POST', '/projects/app/workers', { token, body: { endpoint: 'http://user:pw@127.0.0.1/proto' } });
  t.match(badUrl, { status: 400 }, 'an endpoint must be ws:// or wss:// without credentials');
  const registered = await kiln.api<{ token: string; endpoint: string }>('POST', '/projects/app/workers', {
    token, body: { name: 'far', endpoint: `ws://127.0.0.1:${port}/proto`, server_token: serverToken },
  });
  t.equal(registered.status, 200, JSON.stringify(registered.message));
  t.equal(registered.message.endpoint, `ws://127.0.0.1:${port}/proto`);
  t.notMatch(JSON.stringify(registered.message), serverToken, 'the server token is never shown');

  const dir = tempDir('kiln-discoverable-');
  const peersFile = join(dir, 'peers');
  writeFileSync(peersFile, `${project!.id}:${registered.message.token}\n`, { mode: 0o600 });
  const acceptedFile = join(dir, 'accepted');
  const digest = createHash('sha256').update(serverToken).digest('hex');
  writeFileSync(acceptedFile, `# the server of acme/app\n${project!.id}:${digest}\n`);
  const worker = spawnWorker({
    baseDir: join(dir, 'worker'), peersFile,
    args: ['--discoverable', '--port', String(port), '--accepted-server-tokens-file', acceptedFile],
  });
  t.teardown(() => worker.stop());
  await worker.waitForLog((l) => l.msg === 'a server connected and accepted this worker');
  const started = await worker.waitForLog((l) => l.msg === 'kiln worker started');
  t.ok(Number.isInteger(started['cpuCoreScore']) && Number(started['cpuCoreScore']) > 0, 'worker.system.cpuCoreScore null: the worker measured its core at start');
  const listed = await eventually(async () => (await kiln.api<{ id: string; open: boolean; projects: string[] }[]>('GET', '/workers', { token })).message,
    { until: (workers) => workers.length > 0, interval: 100, message: 'the worker is listed' });
  t.match(listed, [{ open: false, projects: [project!.id] }], 'connected through the registration, authorised for the project');

  const url = `ws://127.0.0.1:${port}/proto`;
  t.equal(await upgradeStatus(url, { 'x-kiln-peer': project!.id, authorization: 'Bearer wrong-token-wrong-token' }), 409, 'one server at a time');
  await kiln.stop();
  await worker.waitForLog((l) => l.msg === 'the server\'s connection was lost');
  t.equal(await upgradeStatus(url, { 'x-kiln-peer': project!.id }), 401, 'no token: 401');
  t.equal(await upgradeStatus(url, { 'x-kiln-peer': project!.id, authorization: 'Bearer wrong-token-wrong-token' }), 403, 'a wrong token: 403');
  t.equal(await upgradeStatus(`ws://127.0.0.1:${port}/elsewhere`, {}), 404);
});

t.test('accepted server token files', async (t) => {
  const peer = '7c6f3b8e-2b5a-4a39-9f3e-2f1f5d1c9a11';
  const parsed = parseAcceptedServerTokens(`# comment\n\n*:${createHash('sha256').update('tok-any').digest('hex')}\n${peer}:${createHash('sha256').update('tok-one').digest('hex')}\n`);
  t.ok(parsed.ok);
  if (!parsed.ok) return;
  t.ok(await serverTokenAccepted(parsed.tokens, 'some-other-peer', 'tok-any'), '* matches any peer');
  t.ok(await serverTokenAccepted(parsed.tokens, peer.toUpperCase(), 'tok-one'));
  t.notOk(await serverTokenAccepted(parsed.tokens, 'another', 'tok-one'), 'a peer line matches its peer only');
  t.match(parseAcceptedServerTokens('nocolon'), { ok: false, line: 1 });
  t.match(parseAcceptedServerTokens('*:not-a-hash'), { ok: false, reason: /argon2|SHA-256/ });
  t.match(parseAcceptedServerTokens('\nbad-peer:' + 'a'.repeat(64)), { ok: false, line: 2, reason: /UUID/ });
});

t.test('worker.useTls: a discoverable worker does not take tokens from the network in plain ws://', async (t) => {
  const dir = tempDir('kiln-discoverable-tls-');
  const worker = spawnWorker({ baseDir: join(dir, 'worker'), args: ['--discoverable', '--listen-addr', '0.0.0.0', '--port', '0'] });
  t.teardown(() => worker.stop());
  const exited = worker.child.exitCode !== null ? Promise.resolve(worker.child.exitCode) : new Promise<number | null>((resolve) => worker.child.once('exit', resolve));
  const outcome = await Promise.race([exited, worker.waitForLog((l) => l.msg === 'kiln worker started').then(() => 'started' as const)]);
  t.not(outcome, 'started', 'the worker refuses to start');
  t.not(outcome, 0);
  t.match(worker.stderr() + JSON.stringify(worker.logs), /worker\.listenAddr 0\.0\.0\.0 would take servers' tokens in plain ws:\/\/.*worker\.useTls false/);
});
