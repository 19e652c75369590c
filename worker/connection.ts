// One /proto connection from the worker to the server: the WebSocket (the `ws` client; uWS is
// server-only), the handshake through the pure machine of protocol/proto, heartbeats, and the
// decoding of every frame with the size cap in force. Jobs see only send/onMessage/closed.
import WebSocket from 'ws';
import type { Logger } from '../config/index.js';
import {
  closeFrameFor, decodeMessage, rejectCodeOfClose, encodeMessage, HANDSHAKE_MAX_MESSAGE_BYTES, HANDSHAKE_TIMEOUT_SECS, isServerMessage, startWorkerHandshake,
  workerHandshakeReceive, workerHandshakeTimeout, type BuildReading, type HandshakeStep, type LoadMetrics, type Message, type Outgoing, type PeerTokens,
  type RejectCode, type Welcome, type WorkerHandshakeState, type WorkerHello,
} from '../protocol/index.js';

export interface ConnectOptions {
  url: string;
  hello: WorkerHello;
  /** null: open mode */
  peers: PeerTokens | null;
  log: Logger;
  load: () => LoadMetrics;
  /** the running builds' readings so far (worker.build.metrics), sent with each heartbeat */
  builds?: () => BuildReading[];
  handshakeTimeoutSecs?: number;
}

export interface Closed {
  code: number;
  reason: string;
}

/** The server refused this worker (or the handshake broke): the code says why. */
export class HandshakeRejected extends Error {
  override readonly name = 'HandshakeRejected';
  constructor(readonly code: RejectCode, readonly reason: string) {
    super(`the server refused the handshake: ${code}: ${reason}`);
  }
}

export interface ProtoConnection {
  readonly welcome: Welcome;
  readonly isOpen: boolean;
  /** false when the connection is already closed */
  send(message: Outgoing): boolean;
  /** resolves once the frame is handed to the socket; rejects when the connection closes first */
  sendDrained(message: Outgoing): Promise<void>;
  /** bytes queued in the socket and not yet sent */
  readonly bufferedAmount: number;
  onMessage(handler: (message: Message) => void): void;
  readonly closed: Promise<Closed>;
  close(code: RejectCode, reason: string): void;
}

/** Above every cap a server may set (ProtoLimits.maxMessageBytes); the cap in force is checked on decode. */
const SOCKET_MAX_PAYLOAD = 64 * 1024 * 1024;

export function connect(options: ConnectOptions): Promise<ProtoConnection> {
  const socket = new WebSocket(options.url, { maxPayload: SOCKET_MAX_PAYLOAD, perMessageDeflate: false, handshakeTimeout: 10_000 });
  return handshakeOver(socket, options, false);
}

/**
 * The same protocol over a socket a server opened to this worker (worker.discoverable,
 * worker/serverListener.ts): the worker still says hello first and is still challenged.
 */
export function acceptServer(socket: WebSocket, options: ConnectOptions): Promise<ProtoConnection> {
  return handshakeOver(socket, options, true);
}

function handshakeOver(socket: WebSocket, options: ConnectOptions, open: boolean): Promise<ProtoConnection> {
  const { log } = options;
  return new Promise((resolve, reject) => {
    let handshake: WorkerHandshakeState;
    let established: Welcome | undefined;
    let maxBytes = HANDSHAKE_MAX_MESSAGE_BYTES;
    let lastHeard = Date.now();
    let heartbeatSeq = 0;
    const handlers: ((message: Message) => void)[] = [];
    const early: Message[] = [];
    let resolveClosed!: (closed: Closed) => void;
    const closed = new Promise<Closed>((r) => (resolveClosed = r));
    let heartbeatTimer: NodeJS.Timeout | undefined;
    const handshakeSeconds = options.handshakeTimeoutSecs ?? HANDSHAKE_TIMEOUT_SECS;
    let handshakeTimer: NodeJS.Timeout | undefined;

    const isOpen = () => socket.readyState === WebSocket.OPEN;
    const send = (message: Outgoing): boolean => {
      if (!isOpen()) return false;
      socket.send(encodeMessage(message), { binary: true });
      return true;
    };
    const closeWith = (code: RejectCode, reason: string) => {
      const frame = closeFrameFor(code, reason);
      if (socket.readyState === WebSocket.OPEN || socket.readyState === WebSocket.CONNECTING) socket.close(frame.closeCode, frame.closeReason);
    };
    const rejectAndClose = (code: RejectCode, reason: string) => {
      log.warn({ code, reason }, 'closing the /proto connection');
      send({ t: 'reject', code, reason });
      closeWith(code, reason);
    };
    const apply = (step: HandshakeStep<WorkerHandshakeState>) => {
      handshake = step.state;
      for (const message of step.send) send(message);
      if (step.close) {
        closeWith(step.close.code, step.close.reason);
        reject(new HandshakeRejected(step.close.code, step.close.reason));
      }
      if (handshake.phase === 'established' && !established) {
        established = handshake.welcome;
        maxBytes = established.limits.maxMessageBytes;
        clearTimeout(handshakeTimer);
        startHeartbeats(established);
        resolve(connection(established));
      }
    };

    const startHeartbeats = (welcome: Welcome) => {
      const { heartbeatIntervalSecs, heartbeatTimeoutSecs } = welcome.limits;
      heartbeatTimer = setInterval(() => {
        // The server acknowledges every heartbeat, so silence this long means it is gone without a TCP close.
        if (heartbeatTimeoutSecs > 0 && Date.now() - lastHeard > heartbeatTimeoutSecs * 1000) {
          rejectAndClose('heartbeat_timeout', `no message from the server for ${heartbeatTimeoutSecs} s`);
          return;
        }
        const builds = options.builds?.() ?? [];
        send({ t: 'heartbeat', seq: heartbeatSeq++, load: options.load(), ...(builds.length > 0 ? { builds: builds.slice(0, 1024) } : {}) });
      }, heartbeatIntervalSecs * 1000);
      heartbeatTimer.unref();
    };

    const connection = (welcome: Welcome): ProtoConnection => ({
      welcome,
      get isOpen() {
        return isOpen();
      },
      get bufferedAmount() {
        return socket.bufferedAmount;
      },
      send,
      sendDrained: (message) =>
        new Promise<void>((done, fail) => {
          if (!isOpen()) return fail(new Error('the /proto connection is closed'));
          socket.send(encodeMessage(message), { binary: true }, (error) => (error ? fail(error) : done()));
        }),
      onMessage: (handler) => {
        handlers.push(handler);
        for (const message of early.splice(0)) handler(message);
      },
      closed,
      close: (code, reason) => rejectAndClose(code, reason),
    });

    const opened = () => {
      log.info({ url: options.url }, 'connected; handshaking');
      handshakeTimer = setTimeout(() => apply(workerHandshakeTimeout(handshake, handshakeSeconds)), handshakeSeconds * 1000);
      apply(startWorkerHandshake(options.hello, options.peers));
    };
    if (open) opened();
    else socket.on('open', opened);

    socket.on('message', (data: Buffer | ArrayBuffer | Buffer[], isBinary: boolean) => {
      lastHeard = Date.now();
      if (!isBinary) return rejectAndClose('malformed_message', 'text frames are not part of /proto; every message is a binary MessagePack frame');
      const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
      const decoded = decodeMessage(bytes, { maxBytes });
      if (!decoded.ok) return rejectAndClose(decoded.code, `${decoded.field}: ${decoded.reason}`);
      const message = decoded.value;
      if (!established) return apply(workerHandshakeReceive(handshake, message));
      if (message.t === 'reject') {
        log.warn({ code: message.code, reason: message.reason }, 'the server closes the connection');
        return closeWith(message.code, message.reason);
      }
      if (!isServerMessage(message.t)) return rejectAndClose('unexpected_message', `${message.t} is a worker's message`);
      if (message.t === 'heartbeatAck') return;
      // A job may arrive right behind the welcome, before the runner has attached: keep it for the first handler.
      if (handlers.length === 0) early.push(message);
      for (const handler of handlers) handler(message);
    });

    socket.on('error', (error) => {
      log.debug({ err: error }, '/proto socket error');
      if (!established) reject(new Error(`cannot connect to ${options.url}: ${error.message}`, { cause: error }));
    });

    socket.on('close', (code, reasonBuffer) => {
      clearInterval(heartbeatTimer);
      clearTimeout(handshakeTimer);
      const reason = reasonBuffer.toString('utf8');
      const rejectCode = rejectCodeOfClose(reason);
      if (!established) {
        reject(rejectCode ? new HandshakeRejected(rejectCode, reason.slice(rejectCode.length + 2)) : new Error(`the server closed the connection during the handshake (${code}${reason ? `: ${reason}` : ''})`));
      }
      resolveClosed({ code, reason });
    });
  });
}
