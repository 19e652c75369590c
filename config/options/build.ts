// Registry options under build.*, scheduler.*.
import { bool, unsignedInt, positiveInt, oneOf } from '../kinds.js';
import { option } from '../option.js';

/** Build retries and time-outs, and the scheduler. */
export const buildOptions = {
  'build.defaultMaxSilentSecs': option(
    unsignedInt(), 3600,
    'seconds without build output before time-out for derivations without maxSilent; 0 disables',
  ),
  'build.defaultTimeoutSecs': option(
    unsignedInt(), 14400,
    'build time-out in seconds for derivations without timeout; 0 disables',
  ),
  'build.inputsUnavailableMaxLoops': option(positiveInt(), 3, 'retries after missing inputs before failing'),
  'build.maxAttempts': option(positiveInt(), 3, 'build or evaluation job attempts before a transient failure is permanent'),
  'build.retryBackoffSecs': option(
    unsignedInt(), 30,
    'seconds before retrying a transient failure, doubled per previous attempt',
  ),
  'build.runOnBuildServers': option(
    bool(), true,
    'build the projects of an organization on its active, checked build servers; each server\'s worker runs on a Nix store of its own, so what a server sends back (unverified, as Nix takes remote builds) reaches only the caches that organization\'s projects write, and its completion or failure of a derivation stands for that organization only: another organization\'s building evaluation of the same derivation builds it again or substitutes it from a cache it reads (docs/builds.md, "Whose completion"); off, servers are stored and checked only',
    { extension: true },
  ),
  'build.substituteMissEscalationThreshold': option(
    positiveInt(), 2,
    'free re-queues of a cache-available derivation within one evaluation before it is built normally; does not count as an attempt; the only bound on that loop',
  ),
  'scheduler.clusterPrepareTimeoutSecs': option(
    positiveInt(), 30,
    'seconds for every member of a cluster job attempt to accept its assignment; otherwise the attempt aborts and the job returns to the queue',
  ),
  'scheduler.clusterReserveAfterSecs': option(
    positiveInt(), 600,
    'seconds a startable cluster job waits for enough simultaneously idle workers before reserving a placement; reserved workers take no new single jobs until the job starts or the reservation expires',
  ),
  'scheduler.clusterReserveTimeoutSecs': option(
    positiveInt(), 1800,
    'seconds a reservation is held before release and re-planning',
  ),
  'scheduler.scoringPolicy': option(
    oneOf(['simple', 'resource-aware']), 'resource-aware',
    'ranking of queued jobs for a requesting worker; simple uses path availability, NAR size, dependency count, waiting time, builtins and fetch worker reservation; resource-aware adds memory fit, worker saturation, CPU, disk and network affinity and preferLocalBuild',
  ),
};
