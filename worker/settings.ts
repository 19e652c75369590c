// The worker's view of its configuration: read once from the option registry, so the rest of
// worker/ takes plain values and tests can build them without a config file.
import { join } from 'node:path';
import type { Config } from '../config/index.js';
import { defaultForkWorkers } from './flakeEval.js';
import { minFreeRamBytes } from './memoryProbe.js';
import { ownStoreEnv } from './ownStore.js';

export interface WorkerSettings {
  serverUrl: string | null;
  /** worker.useTls: tokens only over TLS or loopback (worker/transportSecurity.ts) */
  useTls: boolean;
  /** listen for servers on listenAddr:port (worker/serverListener.ts) */
  discoverable: boolean;
  listenAddr: string;
  port: number;
  acceptedServerTokensFile: string | null;
  baseDir: string;
  /** null: generated on first start and kept in <baseDir>/worker-id */
  id: string | null;
  peersFile: string | null;
  zone: string | null;
  /** worker.endpoint: passed verbatim in cluster rosters (docs/builds.md, "Cluster jobs") */
  endpoint: string | null;
  capabilities: { eval: boolean; build: boolean; fetch: boolean; federate: boolean };
  maxConcurrentBuilds: number;
  maxConcurrentEvals: number;
  /** --cores for each build; null: all */
  maxCores: number | null;
  /** worker.build.builders: the machines every build runs on (worker/remoteBuilders.ts); null builds here */
  builders: string | null;
  /** worker.storeRoot: the root of the worker's own chroot store (worker/ownStore.ts); null: the configured store */
  storeRoot: string | null;
  /** worker.storeRootMaxMb in bytes: the own store is collected past it (worker/ownStoreCollector.ts) */
  storeRootMaxBytes: number;
  architectures: string[];
  /** empty: detected from Nix's configuration */
  systemFeatures: string[];
  cpuCoreScore: number | null;
  logBurstBytesPerMin: number;
  logSustainedBytesPerHour: number;
  logFetchFromStore: boolean;
  narChunkBytes: number;
  /** pushes one job runs at once: half of worker.nar.maxConcurrentUploads */
  narPushesPerJob: number;
  /** worker.nar.partialTtlSecs in ms: abandoned downloads older than this are removed (worker/partialDownloads.ts); 0: never */
  partialTtlMs: number;
  /** '' disables pinning */
  gcrootsDir: string;
  /** worker.nixDaemon.maxConnections: Nix commands running at once (worker/storeConnections.ts) */
  storeConnections: number;
  /**
   * worker.eval.forkWorkers, resolved: evaluation subprocesses at once (worker/evalPool.ts).
   * worker.eval.maxRss needs no setting: each subprocess ends with its call, so none is idle above it.
   */
  evalForkWorkers: number;
  /** worker.system.minFreeRamMb, resolved, in bytes */
  minFreeRamBytes: number;
  /** worker.eval.metrics: the evaluator's statistics with each evaluation's result */
  evalMetrics: boolean;
  /** worker.build.oomScoreAdjust as the worker may apply it (worker/oomScore.ts): builds get it, evaluations 600; null: inherited */
  oomScoreAdjust: number | null;
  /** worker.build.cgroup when worker.build.metrics is on: each build runs in a cgroup made under it; null: none */
  buildCgroup: string | null;
  /** worker.log.traceDir */
  traceDir: string | null;
  /** the environment every Nix and git child runs with: the worker's own plus worker.environmentVariables */
  childEnv: NodeJS.ProcessEnv;
  /** worker.eval.cache.dir resolved: Nix's caches (fetcher, git, eval) of the evaluation subprocesses */
  evalCacheDir: string;
  /** childEnv for the evaluation subprocesses: XDG_CACHE_HOME is evalCacheDir */
  evalEnv: NodeJS.ProcessEnv;
  /** worker.eval.cache.share: locked flake inputs restored from and uploaded to the server (docs/eval-cache.md) */
  evalCacheShare: boolean;
}

export function workerSettings(config: Config, env: NodeJS.ProcessEnv = process.env): WorkerSettings {
  const childEnv: NodeJS.ProcessEnv = { ...env };
  for (const [name, value] of Object.entries(config['worker.environmentVariables'])) {
    if (value === null) delete childEnv[name];
    else childEnv[name] = String(value);
  }
  // A worker must never stop at a credentials prompt nobody will answer.
  childEnv['GIT_TERMINAL_PROMPT'] = '0';
  const storeRoot = config['worker.storeRoot'];
  const baseDir = config['worker.baseDir'];
  const nixEnv = storeRoot === null ? childEnv : ownStoreEnv(childEnv, storeRoot);
  const evalCacheDir = config['worker.eval.cache.dir'] ?? join(baseDir, 'eval-cache');
  return {
    serverUrl: config['worker.serverUrl'],
    discoverable: config['worker.discoverable'],
    useTls: config['worker.useTls'],
    listenAddr: config['worker.listenAddr'],
    port: config['worker.port'],
    acceptedServerTokensFile: config['worker.acceptedServerTokensFile'],
    baseDir,
    id: config['worker.id'],
    peersFile: config['worker.peersFile'],
    zone: config['worker.zone'],
    endpoint: config['worker.endpoint'],
    capabilities: {
      eval: config['worker.capabilities.eval'],
      build: config['worker.capabilities.build'],
      fetch: config['worker.capabilities.fetch'],
      federate: config['worker.capabilities.federate'],
    },
    maxConcurrentBuilds: config['worker.build.maxConcurrent'],
    maxConcurrentEvals: config['worker.eval.maxConcurrent'],
    maxCores: config['worker.build.maxCores'],
    builders: config['worker.build.builders'],
    storeRoot,
    storeRootMaxBytes: config['worker.storeRootMaxMb'] * 1024 * 1024,
    architectures: [...config['worker.system.architectures']],
    systemFeatures: [...config['worker.system.features']],
    cpuCoreScore: config['worker.system.cpuCoreScore'],
    logBurstBytesPerMin: config['worker.log.burstBytesPerMin'],
    logSustainedBytesPerHour: config['worker.log.sustainedBytesPerHour'],
    logFetchFromStore: config['worker.log.fetchFromStore'],
    narChunkBytes: config['worker.nar.chunkBytes'],
    narPushesPerJob: Math.max(1, Math.floor(config['worker.nar.maxConcurrentUploads'] / 2)),
    partialTtlMs: config['worker.nar.partialTtlSecs'] * 1000,
    gcrootsDir: config['worker.gcrootsDir'],
    storeConnections: config['worker.nixDaemon.maxConnections'],
    evalForkWorkers: config['worker.eval.forkWorkers'] ?? defaultForkWorkers(),
    minFreeRamBytes: minFreeRamBytes(config['worker.system.minFreeRamMb']),
    evalMetrics: config['worker.eval.metrics'],
    oomScoreAdjust: config['worker.build.oomScoreAdjust'],
    buildCgroup: config['worker.build.metrics'] ? config['worker.build.cgroup'] : null,
    traceDir: config['worker.log.traceDir'],
    // Last, so worker.environmentVariables cannot point the worker's Nix back at the shared store.
    childEnv: nixEnv,
    evalCacheDir,
    evalEnv: { ...nixEnv, XDG_CACHE_HOME: evalCacheDir },
    evalCacheShare: config['worker.eval.cache.share'],
  };
}
