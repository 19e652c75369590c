// Answers written inside the uWS callback must never take the process down: uWS aborts it when a
// callback returns without a response and without an abort handler, and a HEAD answer
// (endWithoutBody) does not count as a response. So HEAD on a path that fails before any handler
// runs (no route, wrong method, bad percent-encoding), and a credential-free handler whose reply
// cannot be serialized, each get their status and the server stays up.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { writeFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';

const httpIndex = fileURLToPath(new URL('../../http/index.ts', import.meta.url));

// The server runs in a child process: the bug kills the process it is in.
const SERVER = `
import pino from 'pino';
import { RouteTable, Router, startHttpServer, bytesReply } from ${JSON.stringify(httpIndex)};
const table = new RouteTable();
const r = new Router(table);
r.get('/x', () => bytesReply(200, 'hello'), { auth: 'none' });
r.put('/only-put', () => 'ok', { auth: 'none' });
r.get('/bigint', () => ({ n: 1n }), { auth: 'none' });
const server = await startHttpServer({ listenAddr: '127.0.0.1', port: 0, maxRequestSize: 1024, trustedProxies: [], log: pino({ level: 'silent' }), routes: table, anonymous: 'a', async authenticate() { return 'a'; } });
process.stdout.write(String(server.port) + '\\n');
`;

async function startChild(t: Test): Promise<{ base: string; death: () => Promise<string> }> {
  const dir = await mkdtemp(join(tmpdir(), 'kiln-head-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const script = join(fileURLToPath(new URL('.', import.meta.url)), `.server-${process.pid}-${Math.random().toString(36).slice(2)}.mts`);
  await writeFile(script, SERVER);
  t.teardown(() => rm(script, { force: true }));
  const child = spawn(process.execPath, ['--import', 'tsx', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => { stderr += d.toString(); });
  const exit = once(child, 'exit') as Promise<[number | null, string | null]>;
  t.teardown(() => { if (child.exitCode === null && child.signalCode === null) child.kill(); });
  const [line] = await once(child.stdout, 'data') as [Buffer];
  // Called only once a request failed: the process is gone or going.
  const death = async () => {
    const [code, signal] = await exit;
    return `exit ${signal ?? code}: ${stderr.trim()}`;
  };
  return { base: `http://127.0.0.1:${line.toString().trim()}`, death };
}

for (const [what, path, status] of [
  ['no route', '/nope', 404],
  ['a route of another method', '/only-put', 405],
  ['bad percent-encoding', '/%zz', 400],
] as const) {
  t.test(`HEAD on ${what} answers ${status} and the server stays up`, async (t) => {
    const { base, death } = await startChild(t);
    const head = await fetch(base + path, { method: 'HEAD' }).then((r) => r.status, (e: Error) => `failed: ${e.message}`);
    t.equal(head, status);
    const after = await fetch(`${base}/x`).then((r) => r.status, (e: Error) => `failed: ${e.message}`);
    t.equal(after, 200, 'the server still answers');
    if (after !== 200) t.fail(`the server died: ${await death()}`);
  });
}

t.test('a credential-free route whose reply cannot be serialized answers 500', async (t) => {
  const { base, death } = await startChild(t);
  const res = await fetch(`${base}/bigint`).then((r) => r.status, (e: Error) => `failed: ${e.message}`);
  t.equal(res, 500);
  const after = await fetch(`${base}/x`).then((r) => r.status, (e: Error) => `failed: ${e.message}`);
  t.equal(after, 200, 'the server still answers');
  if (after !== 200) t.fail(`the server died: ${await death()}`);
});
