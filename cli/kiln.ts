// The composition root of `kiln serve`: opens storage, builds the services and starts the servers.
import { componentLogger, createLogger, type LoadedConfig, type Logger } from '../config/index.js';
import { uploadBudgetMachine, summarizeUploadBudget } from '../actors/index.js';
import { createRootSupervisor, type Supervisor } from '../supervisors/index.js';
import { createCpuPool, openBlobStore, openDatabase, secureBaseDir, openNarStorage, openRateLimiter, openSecretBox, startQueue, stopQueue, type ArchiveProgress, type CpuPool, type CrashPoints, type Database, type NarStorage } from '../storage/index.js';
import { applyStateFile, binaryCacheAccess, cacheSigningKeys, narIngest, createAccessServices, narUploadService, openIdentityServices, readStateFile, systemClock, type Clock, createCacheServices, openEventSystem, workerAuth, WorkerConnections, BuildLogs, BuildLogFeed, buildDataServices, BuildScheduler, WorkerNars, cacheStorageLimits, mintCacheReadToken, registerServerInstance, buildViewsService, evaluationsService, type EventSystem, type EventSystemOptions, type SchedulerTicker } from '../services/index.js';
import { join } from 'node:path';
import { version } from './version.js';
import { startLocalWorker } from './localWorker.js';
import { anonymous, commitsService, directBuildsService, evaluationPruner, sourceUploadsService } from '../services/index.js';
import { buildRoutes, createAuthenticator, eventSockets, protoRoute, RATE_WINDOW_MS, startHttpServer, startOutboundWorkers, systemTimerClock, type HttpServer, type TimerClock } from '../http/index.js';

/** A running kiln server: what `kiln serve` starts and what tests start in-process. */
export interface Kiln {
  readonly url: string;
  readonly port: number;
  readonly db: Database;
  readonly root: Supervisor;
  readonly log: Logger;
  /** the binary cache's storage (tests age and sweep it) */
  readonly nars: NarStorage;
  /** the event system: events.transaction(…)/publish(…) for emitting, the bus, the delivery engine */
  readonly events: EventSystem;
  /** workers connected over /proto */
  readonly workers: WorkerConnections;
  /** dispatches evaluations and builds to them */
  readonly scheduler: BuildScheduler;
  stop(): Promise<void>;
}


/**
 * Starts the pieces in dependency order (database, queue, CPU pool, supervision tree, HTTP)
 * and stops them in reverse. A failure half-way stops what already started.
 */
export interface StartKilnOptions {
  log?: Logger;
  /** `kiln serve --state-file`: declared users, organizations, projects, caches, … applied before serving */
  stateFile?: string;
  /** event system tuning (retry schedule, polling) for tests and benchmarks */
  events?: EventSystemOptions;
  /** buffered bytes past which a firehose subscriber lags (default 1 MiB) */
  firehoseLagBytes?: number;
  /** /proto handshake time limit (default HANDSHAKE_TIMEOUT_SECS); tests shorten it */
  protoHandshakeTimeoutSecs?: number;
  /** the clock of in-process rate limits (no effect with redis.url); tests step it */
  rateLimitClock?: { now(): number };
  /**
   * The clock of the services: build retry backoffs, event times and webhook attempt schedules,
   * session, key and invitation expiry (default: the system's). Tests step it.
   */
  clock?: Clock;
  /** watches serve/ directory archives being packed (tests: backpressure reaches the packer) */
  archiveProgress?: ArchiveProgress;
  /** the clock upload.minBytesPerSec is measured with; tests move it by hand */
  bodyRateClock?: TimerClock;
  /** the scheduler's periodic pass (every second by default); tests hold it to see what alone wakes the scheduler */
  schedulerTicker?: SchedulerTicker;
  /** where a crash test holds finalize before it kills the process (storage/nars/crashPoints.ts) */
  crashPoints?: CrashPoints;
}

export async function startKiln(loaded: LoadedConfig, opts: StartKilnOptions = {}): Promise<Kiln> {
  const config = loaded.values;
  const log = opts.log ?? createLogger(config);
  const clock = opts.clock ?? systemClock;
  for (const w of loaded.warnings) log.warn(w);
  const stack: (() => Promise<void> | void)[] = [];
  const unwind = async () => {
    for (const stop of stack.reverse()) {
      try {
        await stop();
      } catch (e) {
        log.error({ err: e }, 'error while stopping');
      }
    }
    stack.length = 0;
  };
  let scheduler: BuildScheduler | null = null;
  try {
    // Before anything writes there: tenants' NARs, staged uploads and the local worker's clones are owner-only (docs/storage.md).
    for (const path of await secureBaseDir(config['baseDir'])) log.warn({ path }, 'took group and other permissions off this entry of baseDir: only kiln may read it');
    const urlIsDefault = loaded.sourceOf('database.url').kind === 'default';
    const db = await openDatabase(config, log, { urlIsDefault });
    stack.push(() => db.close());
    // pg-boss's pool follows the scheduler pool's size (its default of 10 is on top of kiln's pools).
    const queue = await startQueue(db.url, log, { maxConnections: Math.max(2, Math.min(10, config['database.maxConnections'])) });
    stack.push(() => stopQueue(queue));
    const pool: CpuPool = createCpuPool();
    stack.push(() => pool.destroy());
    const root = createRootSupervisor({
      onEscalate: (error) => {
        log.fatal({ err: error }, 'the supervision tree gave up; stopping');
        process.exitCode = 70;
        void unwind();
      },
    });
    stack.push(() => root.stop());
    const uploadBudget = root.spawn({
      id: 'upload-budget',
      kind: 'upload-budget',
      logic: uploadBudgetMachine,
      input: { concurrency: config['upload.concurrency'], bytesBudget: config['upload.bytesBudget'] },
      summarize: summarizeUploadBudget,
    });
    const rateLimiter = await openRateLimiter(config, log, opts.rateLimitClock);
    stack.push(() => rateLimiter.close());
    const secretBox = await openSecretBox(db.web, config);
    // Opened before the services that emit into it (accounts, projects, …).
    const events = await openEventSystem(
      { config, db, boss: queue, root, secretBox, log: componentLogger(log, 'scheduler'), userAgent: `kiln/${version}`, clock },
      opts.events,
    );
    stack.push(() => events.close());
    const identity = await openIdentityServices({ sql: db.web, config, log: componentLogger(log, 'web'), clock, events: events.events });
    stack.push(() => identity.close());
    const authenticator = createAuthenticator(identity);
    const accessDeps = {
      sql: db.web, config, log: componentLogger(log, 'web'), clock, secretBox, events: events.events,
      // evaluations parked for want of a cache go back to the queue
      onSubscriptionApproved: () => scheduler?.requeueWaiting(),
    };
    if (opts.stateFile) await applyStateFile(accessDeps, readStateFile(opts.stateFile));
    const access = createAccessServices(accessDeps);
    const blobs = await openBlobStore(config);
    stack.push(() => blobs.close());
    // Registered before the NAR storage, which claims staged uploads under the instance's lease
    // key, and so closed after it: the lease outlives every upload this process works on.
    const instance = await registerServerInstance(db.scheduler);
    stack.push(() => instance.close());
    const nars = openNarStorage({ sql: db.cache, blobs, cpu: pool, config, log: componentLogger(log, 'cache'), leaseKey: instance.leaseKey, ...(opts.crashPoints ? { crashPoints: opts.crashPoints } : {}) });
    stack.push(() => nars.close());
    const binaryCache = binaryCacheAccess({ sql: db.cache, secretBox: accessDeps.secretBox, authenticateBasic: authenticator.authenticateBasic });
    // The ingest front door, once per pool: the web pool for REST, `nix copy` and direct builds, the scheduler's for /proto pushes.
    const ingestOn = (sql: typeof db.web, on: EventSystem['events']) => narIngest({
      nars, keys: cacheSigningKeys(sql, accessDeps.secretBox), uploadBudget, restWaitSecs: config['upload.restWaitSecs'],
      storageLimits: cacheStorageLimits(sql, config['cache.maxStorageGb']), events: on,
    });
    const webIngest = ingestOn(db.web, events.events);
    const narUploads = narUploadService({ sql: db.web, nars, ingest: webIngest, maxUploadSize: config['nar.maxUploadSize'] });
    const caches = createCacheServices({
      sql: db.web, config, log: componentLogger(log, 'cache'), secretBox: accessDeps.secretBox, nars, forgetCache: (name) => binaryCache.forgetCache(name),
      events: events.events,
    });
    const sockets = eventSockets({
      bus: events.bus, streams: events.streams, authenticateToken: authenticator.authenticateToken,
      trustedProxies: config['http.trustedProxies'], log: componentLogger(log, 'web'),
      actorTransitions: (listener) => root.onTransition(listener),
      ...(opts.firehoseLagBytes ? { lagBytes: opts.firehoseLagBytes } : {}),
    });
    // Workers and the scheduler use the scheduler's pool (database.*), not the HTTP API's.
    const schedulerEvents = events.events.withPool(db.scheduler);
    const workers = new WorkerConnections(db.scheduler, {
      instanceId: instance.id,
      publicStats: config['publicStats'],
      emit: (name, content) => events.events.publish(name, { ...content }),
      supervisor: root.supervise({ id: 'workers', restartBudget: { maxRestarts: 100, withinMs: 10_000 } }),
    });
    // Live log readers (POST /builds/{id}/log) hear of new log bytes at once in this process, and of status changes from any.
    const logFeed = new BuildLogFeed();
    logFeed.listen(events.bus);
    const buildLogs = new BuildLogs(db.scheduler, config['log.chunkBytes'], (id) => logFeed.notify(id));
    scheduler = new BuildScheduler({
      sql: db.scheduler, events: schedulerEvents, workers, log: componentLogger(log, 'scheduler'), clock,
      nars: new WorkerNars({
        sql: db.scheduler, ingest: ingestOn(db.scheduler, schedulerEvents), maxUploadSize: config['nar.maxUploadSize'], log: componentLogger(log, 'proto'),
      }),
      logs: buildLogs,
      storage: cacheStorageLimits(db.scheduler, config['cache.maxStorageGb']),
      readToken: (cacheIds, ttlSecs) => mintCacheReadToken(accessDeps.secretBox, cacheIds, ttlSecs),
      supervisor: root.supervise({ id: 'scheduler', restartBudget: { maxRestarts: 100, withinMs: 10_000 } }),
      settings: {
        maxAttempts: config['build.maxAttempts'], retryBackoffSecs: config['build.retryBackoffSecs'],
        defaultTimeoutSecs: config['build.defaultTimeoutSecs'], defaultMaxSilentSecs: config['build.defaultMaxSilentSecs'], serveUrl: config['serveUrl'],
        inputsUnavailableMaxLoops: config['build.inputsUnavailableMaxLoops'],
        substituteMissEscalationThreshold: config['build.substituteMissEscalationThreshold'],
        scoringPolicy: config['scheduler.scoringPolicy'], maxStorageGb: config['cache.maxStorageGb'],
      },
      ...(opts.schedulerTicker ? { ticker: opts.schedulerTicker } : {}),
    });
    workers.setListener(scheduler);
    const running = scheduler;
    running.start();
    stack.push(() => running.stop());
    const prune = evaluationPruner(db.web, config['eval.maxKeep']);
    const evaluations = evaluationsService({ sql: db.web, events: events.events, wake: () => running.wake(), cancel: (id) => running.cancelEvaluation(id), prune,
      repositories: { allowLocal: config['projects.allowLocalRepositories'] },
    });
    const views = buildViewsService(db.web, evaluations);
    const builds = { evaluations, views, data: buildDataServices({ sql: db.web, nars, evaluations, views, feed: logFeed, logs: buildLogs }) };
    // Live sockets of evaluations and builds are authorised like GET /evals/{id} and GET /builds/{id},
    // always: no option replaces these checks (test/http/live/liveSocketAuthorization.test.ts).
    events.streams.resolveWith({
      evaluation: async (who, id) => (await evaluations.visible(who, id, 'viewProject'), { evaluationId: id }),
      build: async (who, id) => {
        const found = await builds.views.build(who, id);
        return { buildId: found.build_id, evaluationId: found.evaluation_id };
      },
    });
    const proto = protoRoute({
      auth: workerAuth(db.scheduler, { localWorker: config['localWorker'] }), workers, log: componentLogger(log, 'proto'), software: `kiln ${version}`,
      maxConnections: config['proto.maxConnections'], heartbeatTimeoutSecs: config['proto.workerHeartbeatTimeoutSecs'],
      narChunkBytes: config['nar.chunkBytes'], narSendChunkTimeoutSecs: config['nar.sendChunkTimeoutSecs'],
      ...(opts.protoHandshakeTimeoutSecs ? { handshakeTimeoutSecs: opts.protoHandshakeTimeoutSecs } : {}),
    });
    const startedAt = new Date();
    const buildRequests = {
      direct: directBuildsService({ sql: db.web, events: events.events, ingest: webIngest, views: builds.views, wake: () => running.wake(), prune }),
      sources: sourceUploadsService({ sql: db.web, blobs, serveUrl: config['serveUrl'], maxBytes: config['http.maxSourceUploadSize'] }),
      commits: commitsService(db.web),
    };
    const routes = buildRoutes({ config, db, root, startedAt, version, identity, rateLimiter, access, nars, binaryCache, narUploads, caches, events, workers, builds, buildRequests, ...(opts.archiveProgress ? { archiveProgress: opts.archiveProgress } : {}) });
    const http: HttpServer = await startHttpServer({
      listenAddr: config['listenAddr'],
      port: config['port'],
      maxRequestSize: config['http.maxRequestSize'],
      trustedProxies: config['http.trustedProxies'],
      minimumBodyRate: {
        limits: { bytesPerSec: config['upload.minBytesPerSec'], windowMs: RATE_WINDOW_MS },
        clock: opts.bodyRateClock ?? systemTimerClock,
      },
      log: componentLogger(log, 'web'),
      routes,
      anonymous,
      authenticate: authenticator.authenticate,
      websockets: (app) => {
        sockets.register(app);
        proto.register(app);
      },
    });
    stack.push(() => http.close());
    stack.push(() => logFeed.close()); // before the HTTP server waits for its requests: live logs end
    stack.push(() => proto.close());
    stack.push(() => sockets.close());
    const outbound = startOutboundWorkers({
      proto, targets: () => access.workerRegistrations.outboundTargets(), isLeader: () => running.isLeader, log: componentLogger(log, 'proto'),
    });
    stack.push(() => outbound.stop());
    if (config['worker.enable']) {
      // worker.baseDir's default is a system path; the local worker of a dev server lives under baseDir.
      const workerDir = loaded.sourceOf('worker.baseDir').kind === 'default' ? join(config['baseDir'], 'worker') : config['worker.baseDir'];
      const localWorker = startLocalWorker({ port: http.port, baseDir: workerDir, log: componentLogger(log, 'proto') });
      if (localWorker) stack.push(() => localWorker.stop());
    }
    const host = config['listenAddr'].includes(':') ? `[${config['listenAddr']}]` : config['listenAddr'];
    const url = `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${http.port}`;
    log.info({ url, version }, 'kiln is serving');
    return { url, port: http.port, db, root, log, nars, events, workers, scheduler: running, stop: unwind };
  } catch (e) {
    await unwind();
    throw e;
  }
}
