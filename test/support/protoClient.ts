// A raw /proto client for server tests: sends frames (valid or not), collects decoded messages and
// the close frame. The real worker (test/support/workerProcess.ts) is used where Nix runs.
import { randomUUID } from 'node:crypto';
import { WebSocket } from 'ws';
import { decodeMessage, encodeMessage, type Hello, type Message, type MessageOf, type MessageType, type Outgoing } from '../../protocol/index.js';

export interface ProtoClient {
  readonly closed: Promise<{ code: number; reason: string }>;
  send(message: Outgoing): void;
  sendRaw(data: Uint8Array | string): void;
  next<T extends MessageType>(t: T): Promise<MessageOf<T>>;
  close(): void;
}

export function testHello(overrides: Partial<Outgoing<'hello'>> = {}): Outgoing<'hello'> {
  return {
    t: 'hello', workerId: randomUUID(), software: 'kiln test', capabilities: { eval: true, build: true, fetch: true, federate: false },
    architectures: ['x86_64-linux'], systemFeatures: [], maxConcurrentBuilds: 2, maxConcurrentEvals: 1, cpuCores: 2, cpuCoreScore: null,
    memoryBytes: 1 << 30, zone: null, open: true, ...overrides,
  };
}

export async function connectProto(url: string): Promise<ProtoClient> {
  const socket = new WebSocket(url, { perMessageDeflate: false });
  const queue: Message[] = [];
  const waiters: { t: MessageType; resolve: (m: Message) => void; reject: (e: Error) => void }[] = [];
  let ended: Error | null = null;
  const closed = new Promise<{ code: number; reason: string }>((resolve) => {
    socket.on('close', (code, reason) => {
      ended = new Error(`the connection closed: ${code} ${reason.toString('utf8')}`);
      for (const w of waiters.splice(0)) w.reject(ended);
      resolve({ code, reason: reason.toString('utf8') });
    });
  });
  socket.on('error', () => undefined);
  socket.on('message', (data: Buffer) => {
    const decoded = decodeMessage(data, { maxBytes: 64 << 20 });
    if (!decoded.ok) return;
    const i = waiters.findIndex((w) => w.t === decoded.value.t);
    if (i !== -1) waiters.splice(i, 1)[0]!.resolve(decoded.value);
    else queue.push(decoded.value);
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  return {
    closed,
    send: (message) => socket.send(encodeMessage(message), { binary: true }),
    sendRaw: (data) => socket.send(data, { binary: typeof data !== 'string' }),
    next<T extends MessageType>(t: T): Promise<MessageOf<T>> {
      const i = queue.findIndex((m) => m.t === t);
      if (i !== -1) return Promise.resolve(queue.splice(i, 1)[0] as MessageOf<T>);
      if (ended) return Promise.reject(ended);
      return new Promise((resolve, reject) => waiters.push({ t, resolve: resolve as (m: Message) => void, reject }));
    },
    close: () => socket.close(1000, 'done'),
  };
}

/** Connects, says hello and answers the challenge with `tokens` (none: open mode). */
export async function handshake(url: string, hello: Outgoing<'hello'>, tokens: { project: string; token: string }[] = []): Promise<ProtoClient> {
  const client = await connectProto(url);
  client.send(hello);
  const challenge = await client.next('challenge');
  client.send({ t: 'auth', nonce: challenge.nonce, tokens });
  return client;
}

export type { Hello };
