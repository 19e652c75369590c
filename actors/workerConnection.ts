// The worker connection actor: one /proto connection after its handshake, until it closes
// (DESIGN.md, "Actors and supervision"; docs/proto.md). The socket lives in http/proto and the
// history row in worker_connections; this machine is what operators see of a connected worker in
// GET /api/v1/admin/actors — idle or working, its jobs, its last load — and where a close ends it.
import { assign, setup, type SnapshotFrom } from 'xstate';

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

export const workerConnectionMachine = setup({
  types: { context: {} as WorkerConnectionContext, events: {} as WorkerConnectionEvent, input: {} as WorkerConnectionInput },
  actions: {
    countHeartbeat: assign({
      heartbeats: ({ context }) => context.heartbeats + 1,
      load1: ({ context, event }) => (event.type === 'heartbeat' ? event.load1 : context.load1),
    }),
    recordClose: assign({ closeCode: ({ event }) => (event.type === 'closed' ? event.code : null) }),
  },
}).createMachine({
  id: 'worker-connection',
  context: ({ input }) => ({ ...input, heartbeats: 0, load1: null, closeCode: null }),
  initial: 'idle',
  states: {
    idle: {
      on: {
        busy: 'working',
        heartbeat: { actions: 'countHeartbeat' },
        closed: { target: 'closed', actions: 'recordClose' },
      },
    },
    working: {
      on: {
        idle: 'idle',
        heartbeat: { actions: 'countHeartbeat' },
        closed: { target: 'closed', actions: 'recordClose' },
      },
    },
    closed: { type: 'final' },
  },
});

export type WorkerConnectionMachine = typeof workerConnectionMachine;
export type WorkerConnectionSnapshot = SnapshotFrom<WorkerConnectionMachine>;

export const summarizeWorkerConnection = (snapshot: WorkerConnectionSnapshot) => {
  const c = snapshot.context;
  return { worker: c.workerId, connection: c.connectionId, address: c.address, jobs: c.running.jobs, heartbeats: c.heartbeats, load1: c.load1 };
};
