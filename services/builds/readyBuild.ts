// A ready build as the scheduler places it (schedulerQueries.ts reads them, buildStatus.ts's
// readiness statement returns those it made ready): a file of its own so neither imports the other.

export interface ReadyBuild {
  id: string;
  drv_path: string;
  /** the derivation's name (no hash): builds of one name share a memory prediction (memoryReservations.ts) */
  name: string;
  system: string;
  required_features: string[];
  outputs: Record<string, string | null>;
  timeout_secs: number | null;
  max_silent_secs: number | null;
  /** the build limits of the tasks whose building evaluations want it (-1: the server's default; 0: none) */
  task_timeouts: number[];
  task_max_silents: number[];
  attempts: number;
  prefer_local_build: boolean;
  /** times a cache claimed the outputs but a worker could not fetch them (migration 0013) */
  substitute_misses: number;
  projects: string[];
  /** when the build was first queued: kiln_dispatch_latency_seconds */
  queued_at: Date;
}

/** A build the readiness counter just made ready (buildStatus.ts), with its retry backoff for the ready queue to compare. */
export interface ReadiedBuild extends ReadyBuild {
  not_before: Date | null;
}
