// A /proto server for tests, speaking the protocol through the same pure pieces the real server
// uses (codec, serverHandshake), on a `ws` WebSocketServer. It accepts workers, hands out jobs,
// receives results and NARs (granting credit, verifying each NAR's hash), so the worker is tested
// end to end without the kiln server. Tokens are compared as they are; the real server compares
// their SHA-256 with stored hashes.
import { randomBytes } from 'node:crypto';
import { WebSocketServer, WebSocket } from 'ws';
import {
  closeFrameFor, decodeMessage, encodeMessage, HANDSHAKE_MAX_MESSAGE_BYTES, hashNar, isWorkerMessage, serverHandshake, startServerHandshake,
  type Hello, type Message, type MessageOf, type MessageType, type Outgoing, type ProtoLimits, type RejectCode, type ServerHandshakeEvent,
  type ServerHandshakeState,
} from '../../protocol/index.js';

export interface ProtoServerOptions {
  /** 0 (default) picks a free port; give the old port to restart a server where workers expect it */
  port?: number;
  /** project UUID → tokens that verify for it */
  tokens?: Record<string, string[]>;
  /** what open mode grants; null (default) refuses workers without a peers file */
  openModeProjects?: string[] | null;
  limits?: Partial<ProtoLimits>;
  handshakeTimeoutSecs?: number;
  /** NAR credit granted at narPushStart (then one more per chunk received); 0 grants none */
  initialCredit?: number;
}

export interface ClosedConnection {
  code: number;
  reason: string;
  /** the worker's hello, when it got that far */
  hello?: Hello;
}

export interface ReceivedNar {
  start: MessageOf<'narPushStart'>;
  bytes: Buffer;
  /** sha256:<nix32> of what arrived */
  narHash: string;
}

export const TEST_LIMITS: ProtoLimits = {
  maxMessageBytes: 8 * 1024 * 1024,
  heartbeatIntervalSecs: 1,
  heartbeatTimeoutSecs: 30,
  narChunkBytes: 64 * 1024,
  narSendChunkTimeoutSecs: 30,
};

/** Messages that arrive, and waiters for them: `next` takes the first unclaimed match. */
class Inbox {
  private readonly queue: Message[] = [];
  private readonly waiters: { match: (m: Message) => boolean; resolve: (m: Message) => void; reject: (e: Error) => void }[] = [];
  private closedWith: Error | undefined;

  push(message: Message): void {
    const waiter = this.waiters.findIndex((w) => w.match(message));
    if (waiter !== -1) this.waiters.splice(waiter, 1)[0]!.resolve(message);
    else this.queue.push(message);
  }

  next(match: (m: Message) => boolean): Promise<Message> {
    const index = this.queue.findIndex(match);
    if (index !== -1) return Promise.resolve(this.queue.splice(index, 1)[0]!);
    if (this.closedWith) return Promise.reject(this.closedWith);
    return new Promise((resolve, reject) => this.waiters.push({ match, resolve, reject }));
  }

  close(error: Error): void {
    this.closedWith = error;
    for (const waiter of this.waiters.splice(0)) waiter.reject(error);
  }
}

export class WorkerSession {
  readonly inbox = new Inbox();
  /** NARs received completely, by store path */
  readonly nars = new Map<string, ReceivedNar>();
  readonly heartbeats: MessageOf<'heartbeat'>[] = [];
  /** false: a server that never grants evaluation batches past the window, to see the worker wait */
  grantsBatchCredit = true;
  private readonly transfers = new Map<number, { start: MessageOf<'narPushStart'>; chunks: Buffer[]; seq: number }>();
  readonly closed: Promise<ClosedConnection>;

  constructor(
    private readonly socket: WebSocket,
    readonly hello: Hello,
    readonly projects: readonly string[],
    closed: Promise<ClosedConnection>,
    private readonly initialCredit: number,
  ) {
    this.closed = closed;
  }

  send(message: Outgoing): void {
    this.socket.send(encodeMessage(message), { binary: true });
  }

  /** Raw bytes, to see how the worker copes with garbage. */
  sendRaw(data: Uint8Array | string): void {
    this.socket.send(data, { binary: typeof data !== 'string' });
  }

  /** The next message of type `t` (and, optionally, for one job). */
  next<T extends MessageType>(t: T, jobId?: string): Promise<MessageOf<T>> {
    return this.inbox.next((m) => m.t === t && (jobId === undefined || ('jobId' in m && m.jobId === jobId))) as Promise<MessageOf<T>>;
  }

  /** The job's final message: one of the result types or jobFailed or jobRefused. */
  async outcome(jobId: string): Promise<Message> {
    const finals = new Set<MessageType>(['evalResult', 'buildResult', 'pushResult', 'changeResult', 'jobFailed', 'jobRefused']);
    return this.inbox.next((m) => finals.has(m.t) && 'jobId' in m && m.jobId === jobId);
  }

  /** Every evalBatch of a job until its evalResult or jobFailed. */
  async evalOutcome(jobId: string): Promise<{ batches: MessageOf<'evalBatch'>[]; final: Message }> {
    const batches: MessageOf<'evalBatch'>[] = [];
    for (;;) {
      const m = await this.inbox.next((x) => (x.t === 'evalBatch' || x.t === 'evalResult' || x.t === 'jobFailed' || x.t === 'jobRefused') && x.jobId === jobId);
      if (m.t === 'evalBatch') batches.push(m);
      else return { batches, final: m };
    }
  }

  /** The job's log as it arrived, up to its final message. */
  async buildOutcome(jobId: string): Promise<{ log: string; final: Message }> {
    const chunks: Buffer[] = [];
    for (;;) {
      const m = await this.inbox.next((x) => (x.t === 'buildLog' || x.t === 'buildResult' || x.t === 'jobFailed' || x.t === 'jobRefused') && x.jobId === jobId);
      if (m.t === 'buildLog') chunks.push(Buffer.from(m.data));
      else return { log: Buffer.concat(chunks).toString('utf8'), final: m };
    }
  }

  /** NAR traffic is answered here, the rest goes to the inbox. */
  async receive(message: Message): Promise<void> {
    if (message.t === 'heartbeat') {
      this.heartbeats.push(message);
      this.send({ t: 'heartbeatAck', seq: message.seq });
      this.inbox.push(message);
      return;
    }
    if (message.t === 'narPushStart') {
      if (this.nars.has(message.info.path)) return this.send({ t: 'narPushAck', transferId: message.transferId, status: 'present' });
      this.transfers.set(message.transferId, { start: message, chunks: [], seq: 0 });
      // initialCredit 0: a server that never grants credit, to see the worker give up.
      if (this.initialCredit > 0) this.send({ t: 'narCredit', transferId: message.transferId, chunks: this.initialCredit });
      return;
    }
    if (message.t === 'narChunk') {
      const transfer = this.transfers.get(message.transferId);
      if (!transfer || message.seq !== transfer.seq) return this.send({ t: 'narAbort', transferId: message.transferId, code: 'protocol', reason: `unexpected chunk ${message.seq}` });
      transfer.seq++;
      transfer.chunks.push(Buffer.from(message.data));
      return this.send({ t: 'narCredit', transferId: message.transferId, chunks: 1 });
    }
    if (message.t === 'narPushEnd') {
      const transfer = this.transfers.get(message.transferId);
      this.transfers.delete(message.transferId);
      if (!transfer) return;
      const bytes = Buffer.concat(transfer.chunks);
      const digest = await hashNar([bytes]);
      if (digest.narHash !== transfer.start.info.narHash || digest.narSize !== transfer.start.info.narSize) {
        return this.send({ t: 'narAbort', transferId: message.transferId, code: 'verify_failed', reason: `got ${digest.narHash}` });
      }
      this.nars.set(transfer.start.info.path, { start: transfer.start, bytes, narHash: digest.narHash });
      return this.send({ t: 'narPushAck', transferId: message.transferId, status: 'stored' });
    }
    if (message.t === 'narAbort') this.transfers.delete(message.transferId);
    // as kiln's server: one batch of credit back for each batch taken (docs/proto.md, "Evaluation batches")
    if (message.t === 'evalBatch' && this.grantsBatchCredit) this.send({ t: 'evalCredit', jobId: message.jobId, batches: 1 });
    this.inbox.push(message);
  }

  close(code: RejectCode, reason: string): void {
    const frame = closeFrameFor(code, reason);
    this.socket.close(frame.closeCode, frame.closeReason);
  }
}

export interface ProtoTestServer {
  readonly port: number;
  readonly url: string;
  /** the next worker to finish the handshake */
  nextWorker(): Promise<WorkerSession>;
  /** the next connection to end, with the close frame the server sent or got */
  nextClose(): Promise<ClosedConnection>;
  /** stops listening and drops every connection without a close frame (as a killed server would) */
  kill(): Promise<void>;
  close(): Promise<void>;
}

/** A queue of values and of waiters for them. */
function channel<T>() {
  const values: T[] = [];
  const waiters: ((value: T) => void)[] = [];
  return {
    put: (value: T) => (waiters.length > 0 ? waiters.shift()!(value) : values.push(value)),
    take: () => (values.length > 0 ? Promise.resolve(values.shift()!) : new Promise<T>((resolve) => waiters.push(resolve))),
  };
}

export async function startProtoServer(options: ProtoServerOptions = {}): Promise<ProtoTestServer> {
  const limits = { ...TEST_LIMITS, ...options.limits };
  const tokens = options.tokens ?? {};
  const workers = channel<WorkerSession>();
  const closes = channel<ClosedConnection>();
  const server = new WebSocketServer({ host: '127.0.0.1', port: options.port ?? 0, path: '/proto', maxPayload: 64 * 1024 * 1024 });
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  const port = (server.address() as { port: number }).port;

  server.on('connection', (socket) => {
    let state: ServerHandshakeState = startServerHandshake(limits, 'kiln test server');
    let session: WorkerSession | undefined;
    let hello: Hello | undefined;
    let closeSent: { code: number; reason: string } | undefined;
    let resolveClosed!: (c: ClosedConnection) => void;
    const closed = new Promise<ClosedConnection>((resolve) => (resolveClosed = resolve));
    const closeWith = (code: RejectCode, reason: string, tell: boolean) => {
      if (tell && socket.readyState === WebSocket.OPEN) socket.send(encodeMessage({ t: 'reject', code, reason }));
      const frame = closeFrameFor(code, reason);
      closeSent = { code: frame.closeCode, reason: frame.closeReason };
      socket.close(frame.closeCode, frame.closeReason);
    };
    const step = (event: ServerHandshakeEvent) => {
      const result = serverHandshake(state, event);
      state = result.state;
      for (const message of result.send) socket.send(encodeMessage(message));
      if (result.close) return closeWith(result.close.code, result.close.reason, false);
      if (result.need?.kind === 'lookup') {
        hello = result.need.hello;
        step({ type: 'challengeReady', projects: Object.keys(tokens), nonce: randomBytes(32), openModeProjects: options.openModeProjects ?? null });
      } else if (result.need?.kind === 'verify') {
        const verified = result.need.tokens.filter((t) => tokens[t.project]?.includes(t.token)).map((t) => t.project);
        step({ type: 'verified', projects: [...new Set(verified)] });
      }
      if (state.phase === 'established' && !session) {
        clearTimeout(timer);
        session = new WorkerSession(socket, state.hello, state.projects, closed, options.initialCredit ?? 4);
        workers.put(session);
      }
    };
    const timer = setTimeout(() => step({ type: 'timeout', seconds: options.handshakeTimeoutSecs ?? 10 }), (options.handshakeTimeoutSecs ?? 10) * 1000);
    socket.on('message', (data: Buffer, isBinary: boolean) => {
      if (!isBinary) return closeWith('malformed_message', 'text frames are not part of /proto', true);
      const decoded = decodeMessage(data, { maxBytes: session ? limits.maxMessageBytes : HANDSHAKE_MAX_MESSAGE_BYTES });
      if (!decoded.ok) return closeWith(decoded.code, `${decoded.field}: ${decoded.reason}`, true);
      if (!session) return step({ type: 'received', message: decoded.value });
      if (!isWorkerMessage(decoded.value.t)) return closeWith('unexpected_message', `${decoded.value.t} is a server's message`, true);
      void session.receive(decoded.value);
    });
    socket.on('close', (code, reason) => {
      clearTimeout(timer);
      // The code and reason of whoever closed first: the server's own when it rejected.
      const result: ClosedConnection = { code: closeSent?.code ?? code, reason: closeSent?.reason ?? reason.toString('utf8'), ...(hello ? { hello } : {}) };
      session?.inbox.close(new Error(`the worker connection closed (${result.code} ${result.reason})`));
      resolveClosed(result);
      closes.put(result);
    });
    socket.on('error', () => undefined);
  });

  const stop = (graceful: boolean) =>
    new Promise<void>((resolve) => {
      for (const client of server.clients) {
        if (graceful) client.close(1001, 'shutting_down: the test server stops');
        else client.terminate();
      }
      server.close(() => resolve());
    });

  return {
    port,
    url: `ws://127.0.0.1:${port}/proto`,
    nextWorker: workers.take,
    nextClose: closes.take,
    kill: () => stop(false),
    close: () => stop(true),
  };
}
