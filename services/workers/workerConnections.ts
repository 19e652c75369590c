// The workers connected to this server process over /proto, and their connection history in
// worker_connections. http/proto owns the sockets; this registry is what the scheduler and
// GET /api/v1/workers see. A duplicate worker id is refused before anything is written.
import type { Sql } from 'postgres';
import { ApiError, type Hello, type Message, type Outgoing, type RejectCode } from '../../protocol/index.js';
import type { Principal } from '../access/index.js';
import {
  summarizeWorkerConnection, workerConnectionMachine,
  type WorkerConnectionContext, type WorkerConnectionEvent, type WorkerConnectionInput, type WorkerConnectionState,
} from '../../actors/index.js';
import type { LightActor, Supervisor } from '../../supervisors/index.js';
import { isSuperuser, superuserRefusal } from '../access/index.js';

/** How services reach one connection without touching the socket. */
export interface WorkerLink {
  send(message: Outgoing): void;
  close(code: RejectCode, reason: string): void;
}

export interface ConnectedWorker {
  readonly connectionId: string;
  readonly hello: Hello;
  readonly projects: readonly string[];
  readonly open: boolean;
  readonly address: string;
  readonly connectedAt: Date;
  lastSeen: number;
  load: Extract<Message, { t: 'heartbeat' }>['load'] | null;
  readonly link: WorkerLink;
  /** the jobs the scheduler of this process gave it and that have not ended (services/builds/schedulerJobs.ts keeps it) */
  readonly running: { jobs: number };
  /** what operators see of the connection (actors/workerConnection.ts); absent without a supervisor */
  readonly actor?: LightActor<WorkerConnectionState, WorkerConnectionEvent, WorkerConnectionContext, WorkerConnectionInput>;
}

/** What the scheduler hears about workers (WorkerConnections.subscribe). */
export interface WorkerListener {
  connected(worker: ConnectedWorker): void;
  received(worker: ConnectedWorker, message: Message): void;
  lost(worker: ConnectedWorker, code: RejectCode, reason: string): void;
}

export interface WorkerView {
  id: string;
  connection_id: string;
  software: string;
  capabilities: Hello['capabilities'];
  architectures: string[];
  system_features: string[];
  max_concurrent_builds: number;
  max_concurrent_evals: number;
  zone: string | null;
  projects: readonly string[];
  open: boolean;
  connected_at: Date;
  last_seen_at: Date;
  load: ConnectedWorker['load'];
}

export interface WorkerEventContent {
  worker: string;
  zone?: string;
  systems?: string[];
  features?: string[];
  reason?: string;
}
export type WorkerEventEmitter = (name: 'worker.connected' | 'worker.disconnected' | 'worker.dead', content: WorkerEventContent) => void;

const eventContent = (hello: Hello, reason?: string): WorkerEventContent => ({
  worker: hello.workerId, systems: hello.architectures, features: hello.systemFeatures,
  ...(hello.zone ? { zone: hello.zone } : {}), ...(reason ? { reason: reason.slice(0, 200) } : {}),
});

export class WorkerConnections {
  private readonly byId = new Map<string, ConnectedWorker | 'joining'>();
  private readonly listeners = new Set<WorkerListener>();

  constructor(
    private readonly sql: Sql,
    private readonly opts: {
      publicStats: boolean; emit?: WorkerEventEmitter; supervisor?: Supervisor;
      /** this server process (services/workers/serverInstance.ts), so other processes can tell live connections */
      instanceId?: string;
    },
  ) {}

  /** The listener hears of every connection, message and loss from now on; the function returned ends that. */
  subscribe(listener: WorkerListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  get size(): number {
    return this.byId.size;
  }

  /** Claims the worker id synchronously, so two handshakes of one id cannot both pass. */
  claim(workerId: string): boolean {
    if (this.byId.has(workerId)) return false;
    this.byId.set(workerId, 'joining');
    return true;
  }

  release(workerId: string): void {
    if (this.byId.get(workerId) === 'joining') this.byId.delete(workerId);
  }

  async connect(hello: Hello, projects: readonly string[], open: boolean, address: string, link: WorkerLink): Promise<ConnectedWorker> {
    const [row] = await this.sql<{ id: string; connected_at: Date }[]>`
      insert into worker_connections (worker_id, software, address, hello, projects, open_mode, server_instance_id)
      values (${hello.workerId}, ${hello.software}, ${address}, ${this.sql.json(JSON.parse(JSON.stringify(hello)))}, ${projects as string[]}::uuid[], ${open},
              ${this.opts.instanceId ?? null})
      returning id, connected_at`;
    const running = { jobs: 0 };
    const actor = this.opts.supervisor?.spawnLight({
      id: `connection-${row!.id}`, kind: 'worker-connection', machine: workerConnectionMachine, summarize: summarizeWorkerConnection,
      input: { workerId: hello.workerId, connectionId: row!.id, address, connectedAt: row!.connected_at.getTime(), running },
      // a connection cannot be revived: the worker reconnects on its own
      rehydrate: () => null,
    });
    const worker: ConnectedWorker = {
      connectionId: row!.id, hello, projects, open, address, connectedAt: row!.connected_at, lastSeen: Date.now(), load: null, link, running,
      ...(actor ? { actor } : {}),
    };
    this.byId.set(hello.workerId, worker);
    this.opts.emit?.('worker.connected', eventContent(hello));
    for (const listener of this.listeners) listener.connected(worker);
    return worker;
  }

  received(worker: ConnectedWorker, message: Message): void {
    worker.lastSeen = Date.now();
    if (message.t === 'heartbeat') {
      worker.load = message.load;
      worker.actor?.send({ type: 'heartbeat', load1: message.load.load1 });
      worker.link.send({ t: 'heartbeatAck', seq: message.seq });
      // Readings of running builds go on to the scheduler, which knows their jobs; a plain heartbeat ends here.
      if (message.builds === undefined || message.builds.length === 0) return;
    }
    for (const listener of this.listeners) listener.received(worker, message);
  }

  async disconnect(worker: ConnectedWorker, code: RejectCode, reason: string): Promise<void> {
    if (this.byId.get(worker.hello.workerId) !== worker) return;
    this.byId.delete(worker.hello.workerId);
    worker.actor?.send({ type: 'closed', code });
    try {
      // The history row first, so whoever sees the jobs re-queued also sees why.
      await this.sql`
        update worker_connections set disconnected_at = now(), last_seen_at = ${new Date(worker.lastSeen)}, close_code = ${code}, close_reason = ${reason.slice(0, 500)}
        where id = ${worker.connectionId}`;
    } finally {
      for (const listener of this.listeners) listener.lost(worker, code, reason);
      this.opts.emit?.(code === 'heartbeat_timeout' ? 'worker.dead' : 'worker.disconnected', eventContent(worker.hello, `${code}: ${reason}`));
    }
  }

  /** Workers silent for longer than `timeoutSecs` (0: never). */
  silent(timeoutSecs: number, now = Date.now()): ConnectedWorker[] {
    if (timeoutSecs === 0) return [];
    return this.connected().filter((w) => now - w.lastSeen > timeoutSecs * 1000);
  }

  connected(): ConnectedWorker[] {
    return [...this.byId.values()].filter((w): w is ConnectedWorker => w !== 'joining');
  }

  /** GET /api/v1/workers: superusers, or anyone when publicStats is on. */
  list(who: Principal): WorkerView[] {
    if (!this.opts.publicStats && !isSuperuser(who)) {
      if (who.kind !== 'user') throw new ApiError('unauthorized', 'listing workers needs a superuser\'s token unless publicStats is on');
      throw new ApiError('forbidden', superuserRefusal(who, 'listing workers needs a superuser unless publicStats is on'));
    }
    return this.connected().map((w) => ({
      id: w.hello.workerId, connection_id: w.connectionId, software: w.hello.software, capabilities: w.hello.capabilities,
      architectures: w.hello.architectures, system_features: w.hello.systemFeatures, max_concurrent_builds: w.hello.maxConcurrentBuilds,
      max_concurrent_evals: w.hello.maxConcurrentEvals, zone: w.hello.zone, projects: w.projects, open: w.open,
      connected_at: w.connectedAt, last_seen_at: new Date(w.lastSeen), load: w.load,
    }));
  }
}
