// Event system test support: a real HTTP receiver, kiln servers on a shared database, WebSocket
// clients, and waiting for rows without timed assertions.
import http from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Sql } from 'postgres';
import type { Test } from 'tap';
import WebSocket from 'ws';
import { loadConfig, type OptionPath } from '../../config/index.js';
import { compileEventGlobs, splitEventGlobs } from '../../protocol/index.js';
import { startKiln, type Kiln, type StartKilnOptions } from '../../cli/kiln.js';
import { apiClient, freePort, LOOPBACK_NETWORKS, testHttpThreads, type TestKiln } from './kiln.js';
import { testDatabase } from './db.js';
import { rememberServerBaseDir } from './caches.js';
import { eventually as boundedWait, within } from './eventually.js';

type Teardown = Pick<Test, 'teardown'>;

export interface ReceivedRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** the status this receiver answered (0: it did not answer) */
  answered: number;
}

/** What the receiver does with the next request: a status to answer, or 'hang' (never answer). */
export type ReceiverMode = number | 'hang';

export interface Receiver {
  readonly url: string;
  readonly port: number;
  readonly requests: ReceivedRequest[];
  /** the answer to every following request (default 200) */
  mode: ReceiverMode;
  /** resolves once `count` requests have arrived; fails after a minute with the URLs received */
  waitFor(count: number): Promise<void>;
  /** stops listening (and drops hung requests); start() listens again on the same port */
  stop(): Promise<void>;
  start(): Promise<void>;
}

export async function startReceiver(t: Teardown, port = 0): Promise<Receiver> {
  const requests: ReceivedRequest[] = [];
  const waiters: { count: number; resolve(): void }[] = [];
  const hung = new Set<http.ServerResponse>();
  let server: http.Server | null = null;
  let boundPort = port;
  const receiver: Receiver = {
    get url() {
      return `http://127.0.0.1:${boundPort}/hook`;
    },
    get port() {
      return boundPort;
    },
    requests,
    mode: 200,
    waitFor(count) {
      if (requests.length >= count) return Promise.resolve();
      return within(new Promise((resolve) => waiters.push({ count, resolve })), 60_000, () => `${count} requests at the receiver; it has ${JSON.stringify(requests.map((r) => r.url))}`);
    },
    async start() {
      server = http.createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const mode = receiver.mode;
          const entry: ReceivedRequest = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), answered: mode === 'hang' ? 0 : mode };
          requests.push(entry);
          if (mode === 'hang') hung.add(res);
          else res.writeHead(mode, { 'content-type': 'text/plain' }).end(mode < 300 ? 'thanks' : 'no thanks');
          for (const w of [...waiters]) {
            if (requests.length >= w.count) {
              waiters.splice(waiters.indexOf(w), 1);
              w.resolve();
            }
          }
        });
      });
      server.keepAliveTimeout = 1000;
      await new Promise<void>((resolve) => server!.listen(boundPort, '127.0.0.1', resolve));
      boundPort = (server.address() as { port: number }).port;
    },
    async stop() {
      const s = server;
      server = null;
      if (!s) return;
      for (const res of hung) res.destroy();
      hung.clear();
      s.closeAllConnections();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    },
  };
  await receiver.start();
  t.teardown(() => receiver.stop());
  return receiver;
}

export interface EventKilnOptions {
  /** a database to share with another kiln (default: a fresh test database) */
  database?: { url: string; sql: Sql };
  overrides?: Partial<Record<OptionPath, unknown>>;
  options?: StartKilnOptions;
}

/** A kiln server in-process like startTestKiln, with event system options and an optional shared database. */
export async function startEventKiln(t: Teardown, opts: EventKilnOptions = {}): Promise<TestKiln> {
  const { url, sql } = opts.database ?? (await testDatabase(t));
  const baseDir = await mkdtemp(join(tmpdir(), 'kiln-events-'));
  const port = await freePort();
  const loaded = loadConfig({
    scope: 'server',
    env: {},
    overrides: {
      'database.url': url,
      'database.minConnections': 0,
      'database.cache.minConnections': 0,
      'database.web.minConnections': 0,
      baseDir,
      port,
      useTls: false,
      'log.level.default': process.env['KILN_TEST_LOG'] ?? 'error',
      'outbound.allowedNetworks': LOOPBACK_NETWORKS,
      'projects.allowLocalRepositories': true,
      ...testHttpThreads(),
      ...opts.overrides,
    },
  });
  const kiln: Kiln = await startKiln(loaded, opts.options ?? {});
  rememberServerBaseDir(sql, baseDir);
  t.teardown(async () => {
    await kiln.stop();
    await rm(baseDir, { recursive: true, force: true });
  });
  return Object.assign(Object.create(null) as object, kiln, { sql, baseDir, api: apiClient(kiln.url) }) as TestKiln;
}

/** Polls `probe` until it returns a value other than undefined; fails with `what` after `limitMs` (see ./eventually.ts). */
export async function eventually<T>(what: string, probe: () => Promise<T | undefined>, limitMs = 20_000): Promise<T> {
  return (await boundedWait(probe, { until: (value) => value !== undefined, timeout: limitMs, message: what })) as T;
}

export interface LiveClient {
  readonly socket: WebSocket;
  /** parsed envelopes in arrival order, after stream.open */
  readonly frames: { event: string; at: string; content: Record<string, unknown> }[];
  /** resolves once `count` frames have arrived; fails after a minute with the events received */
  waitFor(count: number): Promise<void>;
  close(): void;
}

export interface LiveRefusal extends Error {
  /** the HTTP status: of the refused upgrade, or 4000 less than the close code */
  status: number;
  /** the WebSocket close code (4000 + status); null when the upgrade itself was refused */
  closeCode: number | null;
  body: { code?: string; message?: string };
}

const refusal = (status: number, closeCode: number | null, body: LiveRefusal['body']): LiveRefusal =>
  Object.assign(new Error(`live socket refused: ${closeCode ?? status} ${body.code ?? ''} ${body.message ?? ''}`), { status, closeCode, body });

/**
 * Opens a live socket and waits for stream.open (authorised and subscribed). Rejects with a
 * LiveRefusal: an HTTP refusal of the upgrade, or a close with code 4000 + status before stream.open.
 * The firehose sends stream.open only when the globs match it, so for the firehose this asks for it.
 */
export function openLive(kiln: { url: string }, path: string, token?: string, via: 'header' | 'query' = 'header'): Promise<LiveClient> {
  const url = new URL(`${kiln.url.replace(/^http/, 'ws')}/api/v1${path}`);
  const globs = splitEventGlobs(url.searchParams.get('events'));
  if (url.pathname === '/api/v1/metrics/events' && !compileEventGlobs(globs)('stream.open')) url.searchParams.set('events', [...globs, 'stream.open'].join(','));
  if (token && via === 'query') url.searchParams.set('token', token);
  const socket = new WebSocket(url, { headers: token && via === 'header' ? { authorization: `Bearer ${token}` } : {} });
  const frames: LiveClient['frames'] = [];
  const waiters: { count: number; resolve(): void }[] = [];
  let ready = false;
  return new Promise((resolve, reject) => {
    socket.on('message', (data: Buffer) => {
      const frame = JSON.parse(data.toString('utf8')) as LiveClient['frames'][number];
      if (!ready) {
        if (frame.event !== 'stream.open') reject(new Error(`the first frame was ${frame.event}, not stream.open`));
        ready = true;
        resolve({
          socket,
          frames,
          waitFor: (count) => (frames.length >= count ? Promise.resolve() : within(new Promise((r) => waiters.push({ count, resolve: r })), 60_000,
            () => `${count} frames on ${url.pathname}; it has ${JSON.stringify(frames.map((f) => f.event))}`)),
          close: () => socket.close(),
        });
        return;
      }
      frames.push(frame);
      for (const w of [...waiters]) {
        if (frames.length >= w.count) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve();
        }
      }
    });
    socket.once('close', (code: number, reason: Buffer) => {
      if (ready) return;
      const text = reason.toString('utf8');
      const colon = text.indexOf(': ');
      reject(refusal(code - 4000, code, colon < 0 ? { message: text } : { code: text.slice(0, colon), message: text.slice(colon + 2) }));
    });
    socket.once('unexpected-response', (req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => {
        req.destroy();
        reject(refusal(res.statusCode ?? 0, null, JSON.parse(body || '{}') as LiveRefusal['body']));
      });
    });
    socket.once('error', (err) => {
      if (!ready) reject(err);
    });
  });
}
