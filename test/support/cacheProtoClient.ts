// A cache protocol client for tests (docs/cache-protocol.md): a real `ws` WebSocket to
// GET /cache/{cache}/proto, frames decoded with the protocol's own codec.
import WebSocket from 'ws';
import { decodeCacheServerMessage, encodeCacheClientMessage, type CacheClientMessage, type CacheServerMessage } from '../../protocol/index.js';

/** How an opening ended when it did not reach `ready`: an HTTP refusal at the upgrade, or a close. */
export interface CacheProtoRefusal {
  status: number | null;
  body: { code?: string; message?: string } | null;
  closeCode: number | null;
  closeReason: string | null;
}

export interface CacheProtoClient {
  socket: WebSocket;
  ready: Extract<CacheServerMessage, { t: 'ready' }>;
  /** every frame after ready, in order */
  frames: CacheServerMessage[];
  /** resolves with the first frame after the ones already read that `match` accepts */
  next<T extends CacheServerMessage>(match: (m: CacheServerMessage) => m is T): Promise<T>;
  send(message: CacheClientMessage): void;
  /** the server's close: code and reason */
  closed: Promise<{ code: number; reason: string }>;
  close(): void;
}

export const cacheProtoUrl = (kiln: { url: string }, cache: string) => `${kiln.url.replace(/^http/, 'ws')}/cache/${encodeURIComponent(cache)}/proto`;

export function basicHeader(token: string): string {
  return `Basic ${Buffer.from(`nix:${token}`).toString('base64')}`;
}

/** Opens a connection and waits for `ready`; rejects with a CacheProtoRefusal otherwise. */
export function openCacheProto(kiln: { url: string }, cache: string, headers: Record<string, string | string[]> = {}): Promise<CacheProtoClient> {
  const socket = new WebSocket(cacheProtoUrl(kiln, cache), { headers, perMessageDeflate: false });
  const frames: CacheServerMessage[] = [];
  const waiters: { match: (m: CacheServerMessage) => boolean; resolve(m: CacheServerMessage): void }[] = [];
  /** frames a next() has returned */
  const taken: boolean[] = [];
  const closed = new Promise<{ code: number; reason: string }>((resolve) => socket.once('close', (code, reason) => resolve({ code, reason: reason.toString('utf8') })));
  return new Promise((resolve, reject) => {
    let ready: CacheProtoClient['ready'] | null = null;
    socket.on('message', (data: Buffer) => {
      const message = decodeCacheServerMessage(data);
      if (ready === null) {
        if (message.t !== 'ready') return reject(new Error(`the first frame was ${message.t}, not ready`));
        ready = message;
        resolve({
          socket, ready, frames, closed,
          next<T extends CacheServerMessage>(match: (m: CacheServerMessage) => m is T): Promise<T> {
            const at = frames.findIndex((frame, i) => !taken[i] && match(frame));
            if (at >= 0) {
              taken[at] = true;
              return Promise.resolve(frames[at] as T);
            }
            return new Promise<T>((r) => waiters.push({ match, resolve: (m) => r(m as T) }));
          },
          send: (m) => socket.send(encodeCacheClientMessage(m)),
          close: () => socket.close(),
        });
        return;
      }
      frames.push(message);
      const waiter = waiters.findIndex((w) => w.match(message));
      if (waiter >= 0) {
        taken[frames.length - 1] = true;
        waiters.splice(waiter, 1)[0]!.resolve(message);
      }
    });
    socket.once('close', (code, reason) => {
      if (ready === null) reject({ status: null, body: null, closeCode: code, closeReason: reason.toString('utf8') } satisfies CacheProtoRefusal);
    });
    socket.once('unexpected-response', (req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => {
        req.destroy();
        reject({ status: res.statusCode ?? 0, body: body ? (JSON.parse(body) as CacheProtoRefusal['body']) : null, closeCode: null, closeReason: null } satisfies CacheProtoRefusal);
      });
    });
    socket.once('error', (err) => {
      if (ready === null && !(err.message.includes('Unexpected server response'))) reject(err);
    });
  });
}

/** The refusal an opening ended with (fails the test's promise if it opened). */
export async function refusalOf(opening: Promise<CacheProtoClient>): Promise<CacheProtoRefusal> {
  try {
    const client = await opening;
    client.close();
  } catch (e) {
    return e as CacheProtoRefusal;
  }
  throw new Error('the connection opened; a refusal was expected');
}

/** Sends `nar` and collects its answer: narStart, the bytes, end — or the error frame. */
export async function downloadNar(client: CacheProtoClient, id: number, hash: string): Promise<{ start: Extract<CacheServerMessage, { t: 'narStart' }>; bytes: Buffer } | Extract<CacheServerMessage, { t: 'error' }>> {
  client.send({ v: 1, t: 'nar', id, hash });
  return collectNar(client, id);
}

/** The answer to NAR request `id`, from the frames that arrive. */
export async function collectNar(client: CacheProtoClient, id: number): Promise<{ start: Extract<CacheServerMessage, { t: 'narStart' }>; bytes: Buffer } | Extract<CacheServerMessage, { t: 'error' }>> {
  const mine = (m: CacheServerMessage): m is Extract<CacheServerMessage, { t: 'narStart' | 'narChunk' | 'end' | 'error' }> =>
    (m.t === 'narStart' || m.t === 'narChunk' || m.t === 'end' || m.t === 'error') && m.id === id;
  const first = await client.next(mine);
  if (first.t === 'error') return first;
  if (first.t !== 'narStart') throw new Error(`NAR ${id} began with ${first.t}`);
  const chunks: Buffer[] = [];
  for (;;) {
    const frame = await client.next(mine);
    if (frame.t === 'end') break;
    if (frame.t !== 'narChunk') throw new Error(`NAR ${id}: ${frame.t} after narStart (${JSON.stringify(frame)})`);
    chunks.push(Buffer.from(frame.data));
  }
  return { start: first, bytes: Buffer.concat(chunks) };
}
