// The service graph of a server process, built once in dependency order from what cli/kiln.ts opened:
// each service gets finished services only, so nothing is wired after the fact. Cross-cutting
// notifications (a cache changed) travel over the event bus, subscribed to by whoever listens.
import { componentLogger, type Config, type Logger, type StageTracer } from '../../config/index.js';
import { summarizeUploadBudget, uploadBudgetMachine } from '../../actors/index.js';
import type { Clock, Supervisor } from '../../supervisors/index.js';
import type { ArchiveProgress, BlobStore, CpuPool, CrashPoints, Database, KilnMetrics, NarStorage, RateLimiter, PhaseSampleBuffer, SecretBox, TrafficCounters } from '../../storage/index.js';
import {
  cacheMetricsService, instanceWindowService, phaseSeriesService, projectSeriesService, registerServerMetrics, sampleRollupSeriesService, workerSampleSeriesService,
  type CacheMetricsService, type InstanceWindowService, type PhaseSeriesService, type ProjectSeriesService, type SampleRollupSeriesService, type WorkerSampleSeriesService,
} from '../metrics/index.js';
import { type BinaryCacheAccess, type CacheServices, cacheSigningKeys, cacheStorageLimits, createBinaryCacheAccess, createCacheServices, mintCacheReadToken, narIngest, type NarIngest, narUploadService, type NarUploadService, subscriptionsService } from '../caches/index.js';
import { buildControlService, type BuildControlService, buildDataServices, type BuildDataServices, BuildLogFeed, BuildLogs, BuildScheduler, buildViewsService, type BuildViewsService, commitsService, type CommitsService, directBuildsService, type DirectBuildsService, evaluationPruner, evaluationsService, type EvaluationsService, type RunningScheduler, type SchedulerTicker, sourceEvaluationsService, type SourceEvaluationsService, sourceUploadsService, type SourceUploadsService, stopSuperseded, evalInputCacheService, type EvalInputCacheService } from '../builds/index.js';
import { type EventStreams, eventStreamsService, type EventSystem } from '../events/index.js';
import { createTokenAuthentication, type IdentityServices, type TokenAuthentication } from '../accounts/index.js';
import { createSshServices, type SshServices } from '../ssh/index.js';
import { BuildServerPasses, createWorkerAuth, type ServerInstance, type WorkerAuth, WorkerConnections, WorkerNars, workerRegistrationsService } from '../workers/index.js';
import { type AccessDeps, invitationsService, membersService } from '../access/index.js';
import { organizationMembersService, organizationsService, organizationSshKeyService, serversService } from '../organizations/index.js';
import { projectsService, tasksService } from '../projects/index.js';
import { cloneBaseUrl, createHostApi, GitHostReporter, hookReceiverService, OpenPrRunner, RepositoryPoller, repositoryAccess, type HookReceiverService } from '../gitHosts/index.js';
import { readSecretFile } from '../../config/index.js';
import { createOutboundClient } from '../../storage/index.js';
import { cachePinsService, type CachePinsService, GarbageCollector, gcAdminService, type GcAdminService } from '../gc/index.js';

/** What the composition root opened before the services: each owns resources and is closed by it. */
export interface OpenedResources {
  config: Config;
  log: Logger;
  clock: Clock;
  /** kiln's version, for GET /health and the worker handshake */
  version: string;
  db: Database;
  root: Supervisor;
  rateLimiter: RateLimiter;
  secretBox: SecretBox;
  events: EventSystem;
  identity: IdentityServices;
  blobs: BlobStore;
  instance: ServerInstance;
  nars: NarStorage;
  /** the Prometheus series of this process (docs/metrics.md) */
  metrics: KilnMetrics;
  /** the CPU pool, whose queue the metrics read */
  cpu: CpuPool;
  /** cache traffic per minute, flushed to PostgreSQL by the upkeep (docs/metrics.md, stored metrics) */
  trafficCounters: TrafficCounters;
  /** job phase timings, flushed to PostgreSQL by the upkeep (docs/metrics.md, "Stored metrics: job phases") */
  phaseSamples?: PhaseSampleBuffer;
  /** log.traceDir: stage spans (docs/metrics.md, "Stage traces") */
  tracer?: StageTracer;
}

/** Tuning for tests; production passes none. */
export interface ServiceOptions {
  /** the scheduler's periodic pass (every second by default) */
  schedulerTicker?: SchedulerTicker;
  /** what the binary cache's access memo measures its TTLs with (default Date.now) */
  cacheAccessClock?: { now(): number };
  /** watches serve/ directory archives being packed */
  archiveProgress?: ArchiveProgress;
  /** the status reporter's first retry delay (2 s by default) */
  gitHostRetryBaseMs?: number;
  /** the open_pr runs' first retry delay (30 s by default) */
  openPrRetryBaseMs?: number;
  /** how long a private repository's link holds before .kiln-projects is read again (default 10 minutes) */
  gitHostLinkRecheckMs?: number;
  /** false: the garbage collector runs only when a test calls its tick() (docs/gc.md) */
  gcLoop?: boolean;
  /** where a crash test holds a collection pass or deep round before it kills the process */
  crashPoints?: CrashPoints;
  /** a name's addresses for the build servers' outbound checks (default: the system resolver); tests stand in a changing DNS */
  resolve?: AccessDeps['resolve'];
}

/** Every service of a server process: what the HTTP routes, the sockets and the composition root take. */
export interface Services {
  config: Config;
  log: Logger;
  version: string;
  startedAt: Date;
  db: Database;
  root: Supervisor;
  /** token buckets of the auth endpoints and the binary cache routes */
  rateLimiter: RateLimiter;
  identity: IdentityServices;
  /** bearer tokens and HTTP Basic passwords to principals */
  tokens: TokenAuthentication;
  /** organizations, projects, tasks, servers, members, invitations, subscriptions, worker tokens */
  access: AccessServices;
  /** the binary cache's storage: reads, uploads, hot cache */
  nars: NarStorage;
  /** who may read and write a cache at /cache/{cache} (HTTP Basic) */
  binaryCache: BinaryCacheAccess;
  narUploads: NarUploadService;
  /** caches, their NARs (management API) and upstreams */
  caches: CacheServices;
  /** the bus, the emitter, webhooks and task actions */
  events: EventSystem;
  /** who may watch which live feed */
  streams: EventStreams;
  /** workers connected over /proto */
  workers: WorkerConnections;
  /** who a connecting worker is */
  workerAuth: WorkerAuth;
  /** the handshake passes of the workers kiln runs for build servers (cli/buildServerWorkers.ts) */
  buildServerPasses: BuildServerPasses;
  scheduler: RunningScheduler;
  /** live log readers in this process hear of new bytes and of status changes */
  logFeed: BuildLogFeed;
  /** evaluations and the read side of builds */
  builds: { evaluations: EvaluationsService; views: BuildViewsService; data: BuildDataServices; control: BuildControlService };
  /** direct builds, source uploads and commits (docs/builds.md) */
  buildRequests: { direct: DirectBuildsService; sources: SourceUploadsService; sourceEvaluations: SourceEvaluationsService; commits: CommitsService };
  /** the shared evaluation cache: locked flake inputs per organization (docs/eval-cache.md) */
  evalInputs: EvalInputCacheService;
  /** garbage collection: the collector (started by the composition root), pins, the superuser's runs */
  gc: { collector: GarbageCollector; pins: CachePinsService; admin: GcAdminService };
  /** the stored cache traffic: series per cache and the cache board (docs/metrics.md) */
  cacheMetrics: CacheMetricsService;
  /** the other stored series: a worker's samples, the instance window, a project's evaluations and builds (docs/metrics.md) */
  storedMetrics: { workers: WorkerSampleSeriesService; instance: InstanceWindowService; projects: ProjectSeriesService; phases: PhaseSeriesService; rollups: SampleRollupSeriesService };
  /** tests: watches serve/ directory archives being packed */
  archiveProgress?: ArchiveProgress;
  /**
   * The Git host application: webhooks in, status reports out (null while gitHostApp.enable is
   * false); and polling of projects with poll_interval_secs. The composition root starts and stops
   * the reporter and the poller; and the open_pr actions' runner (null with the application off).
   */
  gitHosts: { hooks: HookReceiverService; reporter: GitHostReporter | null; poller: RepositoryPoller; openPrs: OpenPrRunner | null };
  /** the Prometheus series of this process: GET /metrics */
  metrics: KilnMetrics;
  /** users' SSH login keys and the SSH server (ssh.enable; the composition root starts it) */
  ssh: SshServices;
}

export function createServices(opened: OpenedResources, opts: ServiceOptions = {}): Services {
  const { config, log, clock, db, root, secretBox, events, identity, nars, metrics } = opened;
  const webLog = componentLogger(log, 'web');
  const uploadBudget = root.spawn({
    id: 'upload-budget',
    kind: 'upload-budget',
    logic: uploadBudgetMachine,
    input: { concurrency: config['upload.concurrency'], bytesBudget: config['upload.bytesBudget'] },
    summarize: summarizeUploadBudget,
  });
  const tokens = createTokenAuthentication(identity);
  const binaryCache = createBinaryCacheAccess({
    sql: db.cache, secretBox, authenticateBasic: tokens.authenticateBasic, bus: events.bus,
    ...(opts.cacheAccessClock ? { now: () => opts.cacheAccessClock!.now() } : {}),
  });
  // Room checks count what the NAR storage holds, on its pool; every ingest path shares them.
  const storageLimits = cacheStorageLimits(db.cache, config['cache.maxStorageGb']);
  // The ingest front door, once per pool: the web pool for REST, `nix copy` and direct builds, the scheduler's for /proto pushes.
  const ingestOn = (sql: Database['web'], on: EventSystem['events']): NarIngest => narIngest({
    nars, keys: cacheSigningKeys(sql, secretBox), uploadBudget, restWaitSecs: config['upload.restWaitSecs'], storageLimits, events: on, metrics,
    ...(opened.tracer ? { tracer: opened.tracer } : {}),
  });
  const webIngest = ingestOn(db.web, events.events);
  const narUploads = narUploadService({ sql: db.web, nars, ingest: webIngest, maxUploadSize: config['nar.maxUploadSize'] });
  const caches = createCacheServices({
    sql: db.web, config, log: componentLogger(log, 'cache'), secretBox, nars, events: events.events, bus: events.bus, clock, metrics,
    trafficCounters: opened.trafficCounters, ...(opened.tracer ? { tracer: opened.tracer } : {}),
  });

  // Workers and the scheduler use the scheduler's pool (database.*), not the HTTP API's.
  const schedulerEvents = events.events.withPool(db.scheduler);
  const workers = new WorkerConnections(db.scheduler, {
    instanceId: opened.instance.id,
    publicStats: config['publicStats'],
    emit: (name, content) => events.events.publish(name, { ...content }),
    supervisor: root.supervise({ id: 'workers', restartBudget: { maxRestarts: 100, withinMs: 10_000 } }),
  });
  // Live log readers (POST /builds/{id}/log) hear of new log bytes at once in this process, and of status changes from any.
  const logFeed = new BuildLogFeed();
  logFeed.listen(events.bus);
  const buildLogs = new BuildLogs(db.scheduler, config['log.chunkBytes'], (id) => logFeed.notify(id));
  const gitHostEnabled = config['gitHostApp.enable'];
  // The host's API is reached like a webhook receiver: only where outbound.allowedNetworks lets kiln connect.
  const gitHost = gitHostEnabled ? (() => {
    const outbound = createOutboundClient({ allowedNetworks: config['outbound.allowedNetworks'] });
    const privateKeyFile = config['gitHostApp.privateKeyFile']!;
    const api = createHostApi({ apiUrl: config['gitHostApp.apiUrl'], appId: config['gitHostApp.id']!, privateKey: () => readSecretFile(privateKeyFile), outbound, userAgent: `kiln/${opened.version}` });
    const access = repositoryAccess({
      sql: db.scheduler, api, outbound, cloneUrl: cloneBaseUrl(config['gitHostApp.apiUrl'], config['gitHostApp.cloneUrl']), clock, log: componentLogger(log, 'scheduler'),
      ...(opts.gitHostLinkRecheckMs !== undefined ? { recheckMs: opts.gitHostLinkRecheckMs } : {}),
    });
    return { outbound, api, access };
  })() : null;
  const scheduler = new BuildScheduler({
    sql: db.scheduler, events: schedulerEvents, workers, log: componentLogger(log, 'scheduler'), clock,
    nars: new WorkerNars({
      sql: db.scheduler, ingest: ingestOn(db.scheduler, schedulerEvents), maxUploadSize: config['nar.maxUploadSize'], log: componentLogger(log, 'proto'),
      leaseIdleSecs: config['upload.leaseIdleSecs'], clock,
    }),
    logs: buildLogs,
    storage: storageLimits,
    readToken: (cacheIds, ttlSecs) => mintCacheReadToken(secretBox, cacheIds, ttlSecs),
    ...(gitHost ? { privateFetch: gitHost.access.privateFetch } : {}),
    supervisor: root.supervise({ id: 'scheduler', restartBudget: { maxRestarts: 100, withinMs: 10_000 } }),
    metrics,
    ...(opened.phaseSamples ? { phases: opened.phaseSamples } : {}),
    ...(opened.tracer ? { tracer: opened.tracer } : {}),
    settings: {
      maxAttempts: config['build.maxAttempts'], retryBackoffSecs: config['build.retryBackoffSecs'],
      defaultTimeoutSecs: config['build.defaultTimeoutSecs'], defaultMaxSilentSecs: config['build.defaultMaxSilentSecs'], serveUrl: config['serveUrl'],
      inputsUnavailableMaxLoops: config['build.inputsUnavailableMaxLoops'],
      substituteMissEscalationThreshold: config['build.substituteMissEscalationThreshold'],
      scoringPolicy: config['scheduler.scoringPolicy'], maxStorageGb: config['cache.maxStorageGb'],
      clusterPrepareTimeoutSecs: config['scheduler.clusterPrepareTimeoutSecs'], clusterReserveAfterSecs: config['scheduler.clusterReserveAfterSecs'],
      clusterReserveTimeoutSecs: config['scheduler.clusterReserveTimeoutSecs'],
    },
    ...(opts.schedulerTicker ? { ticker: opts.schedulerTicker } : {}),
  });
  // The scheduler hears of every worker connection, message and loss.
  workers.subscribe(scheduler);

  const access = createAccessServices({
    sql: db.web, config, log: webLog, clock, secretBox, events: events.events,
    // evaluations parked for want of a cache go back to the queue
    onSubscriptionApproved: () => scheduler.requeueWaiting(),
    ...(opts.resolve ? { resolve: opts.resolve } : {}),
  });
  const prune = evaluationPruner(db.web, config['eval.maxKeep']);
  const evaluations = evaluationsService({
    sql: db.web, events: events.events, scheduler, prune, repositories: { allowLocal: config['projects.allowLocalRepositories'] },
  });
  const views = buildViewsService(db.web, evaluations);
  const data = buildDataServices({ sql: db.web, nars, evaluations, views, feed: logFeed, logs: buildLogs });
  // Live sockets of evaluations and builds are authorised like GET /evals/{id} and GET /builds/{id},
  // always: no option replaces these checks (test/http/live/liveSocketAuthorization.test.ts).
  const streams = eventStreamsService(db.web, {
    evaluation: async (who, id) => (await evaluations.visible(who, id, 'viewProject'), { evaluationId: id }),
    build: async (who, id) => {
      const found = await views.build(who, id);
      return { buildId: found.build_id, evaluationId: found.evaluation_id };
    },
  });
  const buildRequests = {
    direct: directBuildsService({ sql: db.web, events: events.events, ingest: webIngest, views, scheduler, prune }),
    sources: sourceUploadsService({ sql: db.web, blobs: opened.blobs, serveUrl: config['serveUrl'], maxBytes: config['http.maxSourceUploadSize'] }),
    sourceEvaluations: sourceEvaluationsService({ sql: db.web, events: events.events, scheduler, prune }),
    commits: commitsService(db.web),
  };
  let reporter: GitHostReporter | null = null;
  let openPrs: OpenPrRunner | null = null;
  if (gitHost) {
    openPrs = new OpenPrRunner({
      sql: db.scheduler, bus: events.bus, events: schedulerEvents, api: gitHost.api, privateFetch: gitHost.access.privateFetch, changeJobs: scheduler.changeJobs,
      author: { name: config['pullRequests.commitName'], email: config['pullRequests.commitEmail'] }, frontendUrl: config['frontend.url'], log: componentLogger(log, 'scheduler'),
      clock, supervisor: root, ...(opts.openPrRetryBaseMs !== undefined ? { retryBaseMs: opts.openPrRetryBaseMs } : {}),
    });
    const { api, outbound } = gitHost;
    reporter = new GitHostReporter({
      sql: db.scheduler, bus: events.bus, api, outbound, frontendUrl: config['frontend.url'], log: componentLogger(log, 'scheduler'), clock,
      supervisor: root, ...(opts.gitHostRetryBaseMs !== undefined ? { retryBaseMs: opts.gitHostRetryBaseMs } : {}),
    });
  }
  const hooks = hookReceiverService({
    sql: db.web, events: events.events, secretFile: gitHostEnabled ? config['gitHostApp.webhookSecretFile'] : null,
    repositories: { allowLocal: config['projects.allowLocalRepositories'] }, log: webLog,
    started: async (started, superseded) => {
      await stopSuperseded(events.events, db.web, scheduler, superseded);
      scheduler.wake();
      reporter?.wake();
      for (const taskId of new Set(started.map((s) => s.taskId))) await prune(taskId);
    },
  });
  const poller = new RepositoryPoller({
    sql: db.scheduler, events: events.events, repositories: { allowLocal: config['projects.allowLocalRepositories'] }, log: componentLogger(log, 'scheduler'), clock,
    supervisor: root, ...(gitHost ? { privateFetch: gitHost.access.privateFetch } : {}),
    started: async (started, superseded) => {
      await stopSuperseded(events.events, db.scheduler, scheduler, superseded);
      scheduler.wake();
      reporter?.wake();
      for (const taskId of new Set(started.map((s) => s.taskId))) await prune(taskId);
    },
  });
  registerServerMetrics({ metrics, sql: db.web, pools: { web: db.web, cache: db.cache, scheduler: db.scheduler }, workers, nars, cpu: opened.cpu, labelTopn: config['metrics.labelTopn'],
    uploads: () => {
      const { granted, waiting } = uploadBudget.getSnapshot().context;
      return { granted: granted.length, waiting: waiting.length };
    },
  });
  const collector = new GarbageCollector(
    { sql: db.web, config, log: componentLogger(log, 'cache'), events: events.events, nars, clock, ...(opts.crashPoints ? { crashPoints: opts.crashPoints } : {}) },
    opts.gcLoop === false ? { loop: false } : {},
  );
  const buildServerPasses = new BuildServerPasses();
  const gc = {
    collector,
    pins: cachePinsService({ sql: db.web, clock }),
    admin: gcAdminService({ sql: db.web, clock, wake: () => collector.wake() }),
  };
  return {
    gitHosts: { hooks, reporter, poller, openPrs },
    config, log, version: opened.version, metrics, startedAt: new Date(), db, root, rateLimiter: opened.rateLimiter,
    identity, tokens, access, nars, binaryCache, narUploads, caches, events, streams, workers,
    cacheMetrics: cacheMetricsService({ sql: db.web, clock, caches: caches.caches, labelTopn: config['metrics.labelTopn'] }),
    storedMetrics: {
      workers: workerSampleSeriesService({ sql: db.web, clock }), instance: instanceWindowService({ sql: db.web, clock }), projects: projectSeriesService({ sql: db.web, clock }),
      phases: phaseSeriesService({ sql: db.web, clock }), rollups: sampleRollupSeriesService({ sql: db.web, clock }),
    },
    buildServerPasses,
    workerAuth: createWorkerAuth(db.scheduler, { localWorker: config['localWorker'], passes: buildServerPasses }),
    evalInputs: evalInputCacheService({ sql: db.web, blobs: opened.blobs, maxBytes: config['nar.maxUploadSize'], maxTotalBytes: config['eval.cache.maxTotalBytes'], now: () => clock.now() }),
    scheduler, logFeed, builds: { evaluations, views, data, control: buildControlService({ sql: db.web, events: events.events, evaluations, scheduler }) }, buildRequests, gc,
    ssh: createSshServices({
      sql: db.web, config, log: componentLogger(log, 'cache'), nars, ingest: webIngest, clock, rateLimiter: opened.rateLimiter,
      authenticateApiKey: (secret, peerAddress) => identity.apiKeys.authenticate(secret, peerAddress),
      // builds asked for over SSH are direct builds, followed like POST /builds/{id}/log
      builds: { direct: buildRequests.direct, views, liveLog: (who, id) => data.logStreams.live(who, id) },
    }),
    ...(opts.archiveProgress ? { archiveProgress: opts.archiveProgress } : {}),
  };
}

/** Organizations, projects, tasks, servers, members, invitations, subscriptions and worker registrations, built once at start. */
export function createAccessServices(deps: AccessDeps) {
  return {
    organizations: organizationsService(deps),
    organizationMembers: organizationMembersService(deps),
    organizationSshKey: organizationSshKeyService(deps),
    projects: projectsService(deps),
    tasks: tasksService(deps),
    servers: serversService(deps),
    members: membersService(deps),
    invitations: invitationsService(deps),
    subscriptions: subscriptionsService(deps),
    workerRegistrations: workerRegistrationsService(deps),
  };
}
export type AccessServices = ReturnType<typeof createAccessServices>;
