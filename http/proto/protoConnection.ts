// One /proto connection: the pure serverHandshake machine until `welcome`, then every message
// goes to the worker registry. The socket is reached only through `SocketPort`, so this file has
// no uWS in it. Async lookups come back as machine events; nothing is sent after the close.
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import {
  closeFrameFor, decodeMessage, encodeMessage, HANDSHAKE_MAX_MESSAGE_BYTES, HANDSHAKE_TIMEOUT_SECS, isWorkerMessage, serverHandshake,
  startServerHandshake, type Message, type Outgoing, type ProtoLimits, type RejectCode, type ServerHandshakeEvent, type ServerHandshakeState,
} from '../../protocol/index.js';
import type { ConnectedWorker, WorkerAuth, WorkerConnections } from '../../services/index.js';

export interface SocketPort {
  send(bytes: Uint8Array): void;
  end(closeCode: number, closeReason: string): void;
}

export interface ProtoConnectionDeps {
  auth: WorkerAuth;
  workers: WorkerConnections;
  limits: ProtoLimits;
  software: string;
  log: Logger;
  handshakeTimeoutSecs?: number;
}

export class ProtoConnection {
  private state: ServerHandshakeState;
  private worker: ConnectedWorker | null = null;
  private claimed: string | null = null;
  private closed = false;
  private establishing = false;
  private early: Message[] = [];
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly socket: SocketPort,
    private readonly address: string,
    private readonly loopback: boolean,
    private readonly deps: ProtoConnectionDeps,
  ) {
    this.state = startServerHandshake(deps.limits, deps.software);
    const seconds = deps.handshakeTimeoutSecs ?? HANDSHAKE_TIMEOUT_SECS;
    this.timer = setTimeout(() => this.step({ type: 'timeout', seconds }), seconds * 1000);
  }

  /** A frame from the socket (a copy: uWS reuses its buffer). */
  received(data: Buffer, binary: boolean): void {
    if (this.closed) return;
    if (!binary) return this.close('malformed_message', 'text frames are not part of /proto', true);
    const decoded = decodeMessage(data, { maxBytes: this.worker ? this.deps.limits.maxMessageBytes : HANDSHAKE_MAX_MESSAGE_BYTES });
    if (!decoded.ok) return this.close(decoded.code, `${decoded.field}: ${decoded.reason}`, true);
    const message = decoded.value;
    if (!isWorkerMessage(message.t)) return this.close('unexpected_message', `${message.t} is a server's message`, true);
    if (this.establishing && !this.worker) {
      // welcome is out, the connection row is being written: keep what arrives meanwhile.
      this.early.push(message);
      return;
    }
    if (!this.worker) return this.step({ type: 'received', message });
    this.deliver(message);
  }

  private deliver(message: Message): void {
    if (!this.worker) return;
    if (message.t === 'reject') return this.close(message.code, message.reason, false);
    try {
      this.deps.workers.received(this.worker, message);
    } catch (error) {
      this.deps.log.error({ err: error, worker: this.worker.hello.workerId, message: message.t }, 'a /proto message failed');
      this.close('internal_error', `the server failed on ${message.t}`, true);
    }
  }

  /** The socket closed, from either side. */
  socketClosed(code: number, reason: string): void {
    this.closed = true;
    clearTimeout(this.timer);
    if (this.claimed && !this.worker) this.deps.workers.release(this.claimed);
    if (this.worker) {
      const worker = this.worker;
      this.worker = null;
      // The worker closed (or the TCP connection dropped): its jobs go back to the queue.
      void this.deps.workers.disconnect(worker, 'shutting_down', reason || `closed with ${code}`).catch((err: unknown) => this.deps.log.error({ err }, 'recording a worker disconnect failed'));
    }
  }

  send(message: Outgoing): void {
    if (!this.closed) this.socket.send(encodeMessage(message));
  }

  close(code: RejectCode, reason: string, tell: boolean): void {
    if (this.closed) return;
    if (tell) this.send({ t: 'reject', code, reason });
    const frame = closeFrameFor(code, reason);
    this.deps.log.info({ worker: this.worker?.hello.workerId ?? this.claimed, address: this.address, code, reason }, 'closing a /proto connection');
    const worker = this.worker;
    this.worker = null;
    this.closed = true;
    clearTimeout(this.timer);
    if (this.claimed && !worker) this.deps.workers.release(this.claimed);
    if (worker) void this.deps.workers.disconnect(worker, code, reason).catch((err: unknown) => this.deps.log.error({ err }, 'recording a worker disconnect failed'));
    this.socket.end(frame.closeCode, frame.closeReason);
  }

  private step(event: ServerHandshakeEvent): void {
    if (this.closed) return;
    const result = serverHandshake(this.state, event);
    this.state = result.state;
    for (const message of result.send) this.send(message);
    if (result.close) return this.close(result.close.code, result.close.reason, false);
    if (result.need) this.answer(result.need);
    const state = this.state;
    if (state.phase === 'established' && !this.establishing) {
      this.establishing = true;
      this.establish(state.hello, state.projects, state.open);
    }
  }

  private answer(need: NonNullable<ReturnType<typeof serverHandshake>['need']>): void {
    const { auth, workers } = this.deps;
    if (need.kind === 'lookup') {
      if (!workers.claim(need.hello.workerId)) return this.close('duplicate_worker', `worker ${need.hello.workerId} is already connected`, true);
      this.claimed = need.hello.workerId;
    }
    const work = need.kind === 'lookup'
      ? Promise.all([auth.projectsFor(need.hello), auth.openModeProjects(need.hello, this.loopback)]).then(([projects, open]): ServerHandshakeEvent => (
        { type: 'challengeReady', projects, nonce: randomBytes(32), openModeProjects: open }))
      : auth.verify(need.hello, need.tokens).then((projects): ServerHandshakeEvent => ({ type: 'verified', projects }));
    work.then(
      (event) => this.step(event),
      (error: unknown) => {
        this.deps.log.error({ err: error }, 'the /proto handshake lookup failed');
        this.close('internal_error', 'the server could not look up this worker', true);
      },
    );
  }

  private establish(hello: Message & { t: 'hello' }, projects: readonly string[], open: boolean): void {
    clearTimeout(this.timer);
    this.deps.workers.connect(hello, projects, open, this.address, { send: (m) => this.send(m), close: (c, r) => this.close(c, r, true) }).then(
      (worker) => {
        this.claimed = null;
        if (this.closed) void this.deps.workers.disconnect(worker, 'shutting_down', 'closed during the handshake');
        else {
          this.worker = worker;
          for (const message of this.early.splice(0)) this.deliver(message);
        }
      },
      (error: unknown) => {
        this.deps.log.error({ err: error }, 'recording a worker connection failed');
        this.close('internal_error', 'the server could not record this connection', true);
      },
    );
  }
}
