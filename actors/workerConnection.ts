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
}

export interface WorkerConnectionContext extends WorkerConnectionInput {
  jobs: number;
  heartbeats: number;
  load1: number | null;
  closeCode: string | null;
}

export type WorkerConnectionEvent =
  /** the number of jobs it runs for this process changed (sent at most once per event-loop turn, with the count after it) */
  | { type: 'jobs'; count: number }
  | { type: 'heartbeat'; load1: number }
  | { type: 'closed'; code: string };

export const workerConnectionMachine = setup({
  types: { context: {} as WorkerConnectionContext, events: {} as WorkerConnectionEvent, input: {} as WorkerConnectionInput },
  guards: {
    someJobs: ({ event }) => event.type === 'jobs' && event.count > 0,
    noJobs: ({ event }) => event.type === 'jobs' && event.count === 0,
  },
  actions: {
    countJobs: assign({ jobs: ({ context, event }) => (event.type === 'jobs' ? event.count : context.jobs) }),
    countHeartbeat: assign({
      heartbeats: ({ context }) => context.heartbeats + 1,
      load1: ({ context, event }) => (event.type === 'heartbeat' ? event.load1 : context.load1),
    }),
    recordClose: assign({ closeCode: ({ event }) => (event.type === 'closed' ? event.code : null) }),
  },
}).createMachine({
  id: 'worker-connection',
  context: ({ input }) => ({ ...input, jobs: 0, heartbeats: 0, load1: null, closeCode: null }),
  initial: 'idle',
  states: {
    idle: {
      on: {
        jobs: { guard: 'someJobs', target: 'working', actions: 'countJobs' },
        heartbeat: { actions: 'countHeartbeat' },
        closed: { target: 'closed', actions: 'recordClose' },
      },
    },
    working: {
      on: {
        jobs: [
          { guard: 'noJobs', target: 'idle', actions: 'countJobs' },
          { actions: 'countJobs' },
        ],
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
  return { worker: c.workerId, connection: c.connectionId, address: c.address, jobs: c.jobs, heartbeats: c.heartbeats, load1: c.load1 };
};
