// Change jobs (docs/proto.md changeJob, docs/git-hosts.md "open_pr"): the server's table of the
// changeJobs it gave connected workers, apart from the scheduler's job table (a change job has no
// evaluation or build row to re-queue). A job ends with the worker's changeResult or jobFailed,
// with a refusal, with the loss of its worker, or with a timeout; each ends it exactly once, and
// the caller hears how as a value, never a throw.
import { randomUUID } from 'node:crypto';
import type { Message, Outgoing } from '../../protocol/index.js';
import type { ConnectedWorker } from '../workers/index.js';

/** What a change job needs of a connection: who it is, whether it evaluates and serves the project, how to reach it. */
export type ChangeWorker = Pick<ConnectedWorker, 'open' | 'projects' | 'link'> & { hello: { workerId: string; capabilities: { eval: boolean } } };

/**
 * How a change job ended: the commit now at the branch (null: nothing changed), or why it failed;
 * `transient`: trying again later may succeed (no worker, a lost or refusing worker, a timeout, a
 * shutdown, a failed fetch or push), unlike the command itself failing.
 */
export type ChangeOutcome = { ok: true; pushed: string | null } | { ok: false; error: string; transient: boolean };

export type ChangeJobRequest = Omit<Outgoing<'changeJob'>, 't' | 'jobId'>;

interface OpenChangeJob {
  workerId: string;
  settle(outcome: ChangeOutcome): void;
}

/** a `nix flake update` fetches every input: generous, but a wedged worker must not hold the run forever */
const DEFAULT_TIMEOUT_MS = 30 * 60_000;

export class ChangeJobs {
  private readonly open = new Map<string, OpenChangeJob>();

  constructor(
    private readonly workers: { connected(): ChangeWorker[] },
    private readonly timeoutMs = DEFAULT_TIMEOUT_MS,
  ) {}

  /** Whether a connected worker of this process could take a change job of the project now. */
  canRun(projectId: string): boolean {
    return this.pick(projectId) !== null;
  }

  /**
   * The projects a connected worker of this process could take a change job of: 'all' when an open
   * evaluating worker is connected. The open_pr runner asks for only these projects' runs, so runs
   * no worker here serves neither fill its pass nor keep it spinning.
   */
  servedProjects(): 'all' | string[] {
    const able = this.workers.connected().filter((w) => w.hello.capabilities.eval);
    if (able.some((w) => w.open)) return 'all';
    return [...new Set(able.flatMap((w) => w.projects))];
  }

  /** Sends the job to a connected evaluating worker serving the project and waits for its end. */
  run(request: ChangeJobRequest): Promise<ChangeOutcome> {
    const worker = this.pick(request.project);
    if (!worker) return Promise.resolve({ ok: false, error: 'no connected evaluating worker serves the project', transient: true });
    const jobId = `change:${randomUUID()}`;
    return new Promise<ChangeOutcome>((resolve) => {
      const timer = setTimeout(() => {
        worker.link.send({ t: 'cancelJob', jobId, reason: 'the change job timed out' });
        end({ ok: false, error: `the worker did not answer within ${Math.round(this.timeoutMs / 1000)} s`, transient: true });
      }, this.timeoutMs);
      const end = (outcome: ChangeOutcome) => {
        if (!this.open.delete(jobId)) return;
        clearTimeout(timer);
        resolve(outcome);
      };
      this.open.set(jobId, { workerId: worker.hello.workerId, settle: end });
      worker.link.send({ t: 'changeJob', jobId, ...request });
    });
  }

  /** A worker's message about one of these jobs: true when it was (and is handled), false otherwise. */
  received(worker: ChangeWorker, message: Message): boolean {
    if (!('jobId' in message) || message.jobId === undefined) return false;
    const job = this.open.get(message.jobId);
    if (!job || job.workerId !== worker.hello.workerId) return false;
    if (message.t === 'jobRefused') job.settle({ ok: false, error: `the worker refused the job (${message.refusal}): ${message.message}`, transient: true });
    else if (message.t === 'changeResult') job.settle({ ok: true, pushed: message.pushed });
    // worker_error: the command (or git on the worker) failed, which another try repeats
    else if (message.t === 'jobFailed') job.settle({ ok: false, error: `${message.failure.reason}: ${message.failure.message}`, transient: message.failure.reason !== 'worker_error' });
    return true;
  }

  /** The worker's connection is gone: its change jobs fail (the caller may run them again). */
  lost(workerId: string): void {
    for (const job of [...this.open.values()]) {
      if (job.workerId === workerId) job.settle({ ok: false, error: 'the worker was lost before it answered', transient: true });
    }
  }

  /** The server stops: every open change job fails now rather than hold the shutdown. */
  failAll(error: string): void {
    for (const job of [...this.open.values()]) job.settle({ ok: false, error, transient: true });
  }

  private pick(projectId: string): ChangeWorker | null {
    const able = this.workers.connected().filter((w) => w.hello.capabilities.eval && (w.open || w.projects.includes(projectId)));
    // the least busy with change jobs first
    const busy = (w: ChangeWorker) => [...this.open.values()].filter((j) => j.workerId === w.hello.workerId).length;
    return able.sort((a, b) => busy(a) - busy(b))[0] ?? null;
  }
}
