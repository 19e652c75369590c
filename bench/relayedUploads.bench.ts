// Relayed uploads under a tight loop (issue 22): with http.threads > 1 most connections land on a
// serving thread, which relays every upload to the main thread. Runs many small uploads at a
// given concurrency (multipart POSTs, chunked PUT + finalize, and Nix's own PUTs of a NAR and its
// narinfo) and counts every one that did not get its 200, with the error seen.
// Then `nix copy --to` (real Nix, about 200 paths: two PUTs each) into fresh caches, some at once.
//   npx tsx bench/relayedUploads.bench.ts [uploads] [concurrency] [http.threads] [nix copies]
import { randomBytes } from 'node:crypto';
import { channel } from 'node:diagnostics_channel';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildBenchClosure, commandOutput } from './benchClosure.js';
import { encodeNarStrings, encodeU64, hashNar, narPadding, NIX32_ALPHABET } from '../protocol/index.js';
import { loadAverage } from './childServer.js';
import { startBenchKiln } from './benchKiln.js';

const total = Number(process.argv[2] ?? 1000);
const concurrency = Number(process.argv[3] ?? 8);
const threads = Number(process.argv[4] ?? 2);
const nixCopies = Number(process.argv[5] ?? 0);
const NIX_OPTIONS = ['--option', 'sandbox', 'false', '--option', 'build-users-group', '', '--option', 'substituters', ''];
const work = await mkdtemp(join(tmpdir(), 'kiln-bench-relay-'));
// Built before the server starts: Nix would block the server's event loop (this process's).
const closure = nixCopies > 0 ? await buildBenchClosure(work, 180, NIX_OPTIONS) : null;

const nix32 = (n: number) => Array.from(randomBytes(n), (b) => NIX32_ALPHABET[b & 31]).join('');
const narOfFile = (contents: Buffer) => Buffer.concat([
  encodeNarStrings('nix-archive-1', '(', 'type', 'regular', 'contents'), encodeU64(contents.length), contents,
  Buffer.alloc(narPadding(contents.length)), encodeNarStrings(')'),
]);

const bench = await startBenchKiln({ 'nar.maxUploadSize': 64 << 20, 'http.threads': threads });
await bench.createCache('bench');
const { kiln, token } = bench;
const auth = { authorization: `Bearer ${token}` };

async function expectOk(what: string, res: Response): Promise<Response> {
  if (!res.ok) throw new Error(`${what}: ${res.status} ${await res.text()}`);
  return res;
}

async function multipart(i: number): Promise<void> {
  // Every 25th is a 16 MiB NAR (the relay pauses and resumes the client), the rest 1-4 KiB.
  const nar = narOfFile(randomBytes(i % 25 === 0 ? 16 << 20 : 1024 + (i % 3072)));
  const digest = await hashNar([nar]);
  const form = new FormData();
  form.append('narinfo', JSON.stringify({ store_path: `/nix/store/${nix32(32)}-m${i}`, nar_hash: digest.narHash, nar_size: digest.narSize, references: [] }));
  form.append('nar', new Blob([nar]), 'x.nar');
  await (await expectOk('multipart', await fetch(`${kiln.url}/api/v1/caches/bench/nars`, { method: 'POST', headers: auth, body: form }))).arrayBuffer();
}

async function chunked(i: number): Promise<void> {
  const nar = narOfFile(randomBytes(96 * 1024 + (i % 3072)));
  const digest = await hashNar([nar]);
  const hash = nix32(32);
  const piece = 32 * 1024;
  for (let offset = 0; offset < nar.length; offset += piece) {
    await (await expectOk('chunk', await fetch(`${kiln.url}/api/v1/caches/bench/nars/${hash}/chunk?offset=${offset}`, {
      method: 'PUT', headers: { ...auth, 'content-type': 'application/octet-stream' }, body: nar.subarray(offset, offset + piece),
    }))).arrayBuffer();
  }
  await (await expectOk('finalize', await fetch(`${kiln.url}/api/v1/caches/bench/nars/${hash}/finalize`, {
    method: 'POST', headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ store_path: `/nix/store/${hash}-c${i}`, nar_hash: digest.narHash, nar_size: digest.narSize, references: [] }),
  }))).arrayBuffer();
}

async function nixPut(i: number): Promise<void> {
  const nar = narOfFile(randomBytes(2048 + (i % 3072)));
  const digest = await hashNar([nar]);
  const hash = nix32(32);
  const fileHash = nix32(52);
  const basic = { authorization: `Basic ${Buffer.from(`bench:${token}`).toString('base64')}` };
  await (await expectOk('nar put', await fetch(`${kiln.url}/cache/bench/nar/${fileHash}.nar`, { method: 'PUT', headers: basic, body: nar }))).arrayBuffer();
  const narinfo = [`StorePath: /nix/store/${hash}-n${i}`, `URL: nar/${fileHash}.nar`, 'Compression: none', `FileHash: ${digest.narHash}`,
    `FileSize: ${nar.length}`, `NarHash: ${digest.narHash}`, `NarSize: ${digest.narSize}`, 'References: ', ''].join('\n');
  await (await expectOk('narinfo put', await fetch(`${kiln.url}/cache/bench/${hash}.narinfo`, { method: 'PUT', headers: basic, body: narinfo }))).arrayBuffer();
}

// Per connection: when it opened, how many requests it carried, when its last answer ended. A reset
// on a connection idle for seconds is a keep-alive race; one right after an answer is not.
interface Conn { opened: number; requests: number; lastDone: number; lastSent: number }
const conns = new WeakMap<Socket, Conn>();
const requestConn = new WeakMap<object, { socket: Socket; sentAt: number; idleBefore: number; nth: number }>();
channel('undici:client:connected').subscribe((m) => { conns.set((m as { socket: Socket }).socket, { opened: performance.now(), requests: 0, lastDone: performance.now(), lastSent: 0 }); });
channel('undici:client:sendHeaders').subscribe((m) => {
  const { request, socket } = m as { request: object; socket: Socket };
  const c = conns.get(socket);
  if (c === undefined) return;
  c.requests++;
  const now = performance.now();
  requestConn.set(request, { socket, sentAt: now, idleBefore: now - c.lastDone, nth: c.requests });
  c.lastSent = now;
});
channel('undici:request:trailers').subscribe((m) => {
  const r = requestConn.get((m as { request: object }).request);
  const c = r && conns.get(r.socket);
  if (c) c.lastDone = performance.now();
});
channel('undici:request:error').subscribe((m) => {
  const { request, error } = m as { request: { method: string; path: string }; error: Error };
  const r = requestConn.get(request);
  const c = r && conns.get(r.socket);
  console.log(`  error ${request.method} ${request.path.slice(0, 60)}: ${error.message} port ${r?.socket.localPort} request #${r?.nth} idle before ${r?.idleBefore.toFixed(0)} ms, failed ${r ? (performance.now() - r.sentAt).toFixed(0) : '?'} ms after sending, conn age ${c ? (performance.now() - c.opened).toFixed(0) : '?'} ms, read ${r?.socket.bytesRead} written ${r?.socket.bytesWritten}`);
});

const kinds = { multipart, chunked, nixPut } as const;
const failures = new Map<string, number>();
const done: Record<string, number> = { multipart: 0, chunked: 0, nixPut: 0 };
let next = 0;
const started = performance.now();
const load0 = loadAverage();
async function lane(): Promise<void> {
  while (next < total) {
    const i = next++;
    const kind = (['multipart', 'chunked', 'nixPut'] as const)[i % 3]!;
    try {
      await kinds[kind](i);
      done[kind]!++;
    } catch (e) {
      const cause = e instanceof Error && e.cause instanceof Error ? ` (${(e.cause as NodeJS.ErrnoException).code ?? e.cause.message})` : '';
      const key = `${kind}: ${e instanceof Error ? e.message.slice(0, 160) : String(e)}${cause}`;
      failures.set(key, (failures.get(key) ?? 0) + 1);
    }
  }
}
await Promise.all(Array.from({ length: concurrency }, lane));
const seconds = (performance.now() - started) / 1000;
console.log(JSON.stringify({ threads, concurrency, total, done, failed: [...failures.values()].reduce((a, b) => a + b, 0), seconds: Math.round(seconds), load: [load0, loadAverage()] }));
for (const [k, n] of failures) console.log(`  ${n}× ${k}`);
if (closure !== null) {
  const netrc = join(work, 'netrc');
  await writeFile(netrc, `machine 127.0.0.1\nlogin bench\npassword ${token}\n`, { mode: 0o600 });
  let copied = 0;
  const copyFailures: string[] = [];
  const copyInto = async (n: number) => {
    await bench.createCache(`copy${n}`);
    try {
      await commandOutput('nix', ['--extra-experimental-features', 'nix-command', ...NIX_OPTIONS, 'copy', '--option', 'netrc-file', netrc,
        '--to', `${kiln.url}/cache/copy${n}?compression=zstd`, closure.root]);
      copied++;
    } catch (e) {
      copyFailures.push(e instanceof Error ? e.message.slice(-400) : String(e));
    }
  };
  for (let n = 0; n < nixCopies; n += 2) await Promise.all([copyInto(n), ...(n + 1 < nixCopies ? [copyInto(n + 1)] : [])]);
  console.log(JSON.stringify({ nixCopyTo: { copies: nixCopies, paths: closure.closure.length, ok: copied, failed: copyFailures.length }, load: loadAverage() }));
  for (const f of copyFailures) console.log(`  nix copy failed: ${f}`);
}
await bench.stop();
await rm(work, { recursive: true, force: true });
