// A simulated /proto worker for the scheduler benches: the real codec and handshake, heartbeats
// at the rate the server's welcome asks for, no Nix. What it does with jobs is up to the caller.
import { randomUUID } from 'node:crypto';
import { WebSocket } from 'ws';
import { decodeMessage, encodeMessage, type Message, type Outgoing } from '../protocol/index.js';

export interface SimWorker {
  readonly workerId: string;
  send(message: Outgoing): void;
  onMessage(handler: (message: Message) => void): void;
  close(): void;
}

export interface SimWorkerOptions {
  /** none: open mode (the server must run with localWorker on, and we connect over loopback) */
  tokens?: { project: string; token: string }[];
  maxConcurrentBuilds?: number;
  maxConcurrentEvals?: number;
  capabilities?: { eval: boolean; build: boolean };
}

export function simHello(opts: SimWorkerOptions): Outgoing<'hello'> {
  const caps = opts.capabilities ?? { eval: true, build: true };
  return {
    t: 'hello', workerId: randomUUID(), software: 'kiln bench', capabilities: { ...caps, fetch: false, federate: false },
    architectures: ['x86_64-linux'], systemFeatures: [], maxConcurrentBuilds: opts.maxConcurrentBuilds ?? 4,
    maxConcurrentEvals: opts.maxConcurrentEvals ?? 1, cpuCores: 4, cpuCoreScore: null, memoryBytes: 8 << 30, zone: null,
    open: opts.tokens === undefined,
  };
}

const LOAD = { runningBuilds: 0, runningEvals: 0, load1: 0.5, memoryFreeBytes: 4 << 30, memoryTotalBytes: 8 << 30, storeFreeBytes: null };

/** Connects, finishes the handshake and starts beating; resolves once welcomed. */
export async function connectSimWorker(url: string, opts: SimWorkerOptions = {}): Promise<SimWorker> {
  const hello = simHello(opts);
  const socket = new WebSocket(url, { perMessageDeflate: false });
  const handlers: ((m: Message) => void)[] = [];
  let beat: NodeJS.Timeout | null = null;
  let first: NodeJS.Timeout | null = null;
  const stopBeating = () => {
    if (first) clearTimeout(first);
    if (beat) clearInterval(beat);
  };
  const send = (message: Outgoing) => {
    if (socket.readyState === WebSocket.OPEN) socket.send(encodeMessage(message), { binary: true });
  };
  const welcomed = new Promise<void>((resolve, reject) => {
    socket.on('error', reject);
    socket.on('close', (code, reason) => {
      stopBeating();
      reject(new Error(`worker ${hello.workerId} closed: ${code} ${reason.toString('utf8')}`));
    });
    socket.on('open', () => send(hello));
    socket.on('message', (data: Buffer) => {
      const decoded = decodeMessage(data, { maxBytes: 64 << 20 });
      if (!decoded.ok) return;
      const message = decoded.value;
      if (message.t === 'challenge') send({ t: 'auth', nonce: message.nonce, tokens: opts.tokens ?? [] });
      else if (message.t === 'welcome') {
        // Beats start at a random phase, as real workers that connected at different times would.
        const every = message.limits.heartbeatIntervalSecs * 1000;
        let seq = 0;
        first = setTimeout(() => {
          send({ t: 'heartbeat', seq: seq++, load: LOAD });
          beat = setInterval(() => send({ t: 'heartbeat', seq: seq++, load: LOAD }), every);
        }, Math.random() * every);
        resolve();
      } else if (message.t === 'reject') reject(new Error(`rejected: ${message.code} ${message.reason}`));
      else for (const handler of handlers) handler(message);
    });
  });
  await welcomed;
  return {
    workerId: hello.workerId,
    send,
    onMessage: (handler) => handlers.push(handler),
    close: () => {
      stopBeating();
      socket.close(1000, 'done');
    },
  };
}
