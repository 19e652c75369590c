// The scheduler as the rest of the server reaches it: a port, so services and routes depend on what
// they call on it and not on the class that dispatches (services/builds/buildScheduler.ts).

/** What services call on the scheduler: wake it, have it re-queue parked work, stop an evaluation's jobs. */
export interface SchedulerPort {
  /** runs a pass soon (a new evaluation or direct build is waiting) */
  wake(): void;
  /** evaluations parked for want of a writable cache may now have one */
  requeueWaiting(): void;
  /** the evaluation was aborted: its jobs stop */
  cancelEvaluation(evaluationId: string): void;
  /** whether this process holds the scheduler's lock (outbound workers are dialled by the leader only) */
  readonly isLeader: boolean;
}

/** What the composition root does with the scheduler besides: start and stop it; tests run a pass and wait for it. */
export interface RunningScheduler extends SchedulerPort {
  start(): void;
  stop(): Promise<void>;
  /** resolves once a pass that began after this call has ended */
  passNow(): Promise<void>;
}
