// The worker connection actor: one /proto connection after its handshake, until it closes
// (DESIGN.md, "Actors and supervision"; docs/proto.md). The socket lives in http/proto and the
// history row in worker_connections; this machine is what operators see of a connected worker in
// GET /api/v1/admin/actors — idle or working, its jobs, its last load — and where a close ends it.
// A light actor (supervisors/lightActor.ts): a worker turns idle and busy again at every dispatch
// cycle, and an xstate step of this machine cost about as much as the dispatch of a build (the
// dispatch bench, bench/README.md).
export interface WorkerConnectionInput {
  workerId: string;
  connectionId: string;
  address: string;
  /** epoch ms */
  connectedAt: number;
  /**
   * The jobs it runs for this process, kept by the scheduler (services/builds/schedulerJobs.ts) and
   * read when operators look: counting each job's start and end as an event here cost more than
   * the dispatch itself. The machine hears only the turns between idle and working.
   */
  running: { jobs: number };
}

export interface WorkerConnectionContext extends WorkerConnectionInput {
  heartbeats: number;
  load1: number | null;
  closeCode: string | null;
}

export type WorkerConnectionEvent =
  /** its first job started (sent at most once per event-loop turn) */
  | { type: 'busy' }
  /** its last job ended */
  | { type: 'idle' }
  | { type: 'heartbeat'; load1: number }
  | { type: 'closed'; code: string };

export type WorkerConnectionState = 'idle' | 'working' | 'closed';

/** The connection's transitions: state → event → next state. What a state does not list, it ignores. */
const TRANSITIONS: Record<WorkerConnectionState, Partial<Record<WorkerConnectionEvent['type'], WorkerConnectionState>>> = {
  idle: { busy: 'working', heartbeat: 'idle', closed: 'closed' },
  working: { idle: 'idle', heartbeat: 'working', closed: 'closed' },
  closed: {},
};

export const workerConnectionMachine = {
  initial: 'idle' as WorkerConnectionState,
  final: new Set<WorkerConnectionState>(['closed']) as ReadonlySet<WorkerConnectionState>,
  context: (input: WorkerConnectionInput): WorkerConnectionContext => ({ ...input, heartbeats: 0, load1: null, closeCode: null }),
  step(state: WorkerConnectionState, context: WorkerConnectionContext, event: WorkerConnectionEvent): { state: WorkerConnectionState; context: WorkerConnectionContext } | null {
    const next = TRANSITIONS[state][event.type];
    if (next === undefined) return null;
    if (event.type === 'heartbeat') return { state: next, context: { ...context, heartbeats: context.heartbeats + 1, load1: event.load1 } };
    if (event.type === 'closed') return { state: next, context: { ...context, closeCode: event.code } };
    return { state: next, context };
  },
};

export const summarizeWorkerConnection = (_state: WorkerConnectionState, c: WorkerConnectionContext) => (
  { worker: c.workerId, connection: c.connectionId, address: c.address, jobs: c.running.jobs, heartbeats: c.heartbeats, load1: c.load1 });
