// The server side of worker.discoverable (docs/worker.md, "Discoverable workers"): the process
// that holds the scheduler lock dials every registered worker endpoint and keeps the connection,
// redialling with a doubling delay (at most 60 s) when it drops. One process dials, so a worker
// is not fought over by every server process; the others take over with the lock.
import type { Logger } from 'pino';
import type { OutboundWorkerTarget } from '../../services/index.js';
import type { ProtoRoute } from './protoRoute.js';

export interface OutboundWorkersOptions {
  proto: Pick<ProtoRoute, 'dial'>;
  targets(): Promise<OutboundWorkerTarget[]>;
  /** true while this process holds the scheduler lock */
  isLeader(): boolean;
  log: Logger;
  /** how often the registrations are read again */
  intervalMs?: number;
}

export interface OutboundWorkers {
  stop(): void;
}

interface Dialled {
  connected: boolean;
  failures: number;
  nextAt: number;
}

const MAX_DELAY_MS = 60_000;
/** a connection that lasted this long resets the backoff */
const STABLE_MS = 60_000;

export function startOutboundWorkers(opts: OutboundWorkersOptions): OutboundWorkers {
  const state = new Map<string, Dialled>();
  let stopped = false;

  const dial = (target: OutboundWorkerTarget, entry: Dialled) => {
    entry.connected = true;
    const startedAt = Date.now();
    const headers: Record<string, string> = { 'x-kiln-peer': target.projectId };
    if (target.serverToken !== null) headers['authorization'] = `Bearer ${target.serverToken}`;
    opts.log.info({ endpoint: target.endpoint }, 'dialling a discoverable worker');
    void opts.proto.dial(target.endpoint, headers).then((closed) => {
      entry.connected = false;
      entry.failures = Date.now() - startedAt >= STABLE_MS ? 0 : entry.failures + 1;
      entry.nextAt = Date.now() + Math.min(MAX_DELAY_MS, 1000 * 2 ** Math.max(0, entry.failures - 1));
      if (!stopped) opts.log.warn({ endpoint: target.endpoint, code: closed.code, reason: closed.reason }, 'the connection to a discoverable worker ended');
    });
  };

  const tick = async () => {
    if (stopped || !opts.isLeader()) return;
    const targets = await opts.targets();
    for (const target of targets) {
      const entry = state.get(target.registrationId) ?? { connected: false, failures: 0, nextAt: 0 };
      state.set(target.registrationId, entry);
      if (!entry.connected && Date.now() >= entry.nextAt) dial(target, entry);
    }
  };
  const run = () => void tick().catch((error: unknown) => opts.log.error({ err: error }, 'reading discoverable workers failed'));
  const timer = setInterval(run, opts.intervalMs ?? 1000);
  timer.unref();
  run();
  return {
    stop() {
      stopped = true;
      clearInterval(timer);
    },
  };
}
