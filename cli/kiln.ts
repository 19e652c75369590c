// The composition root of `kiln serve`: opens storage, builds the services and starts the servers.
import type { LookupAddress } from 'node:dns';
import { componentLogger, createLogger, openStageTracer, type LoadedConfig, type Logger } from '../config/index.js';
import { createRootSupervisor, type Supervisor } from '../supervisors/index.js';
import { createCpuPool, createOutboundClient, KilnMetrics, PhaseSampleBuffer, TrafficCounters, openBlobStore, openDatabase, secureBaseDir, openNarStorage, openRateLimiter, openSecretBox, shrinkHeapAtRest, startQueue, watchHeapAtRest, stopQueue, type ArchiveProgress, type CpuPool, type CrashPoints, type Database, type NarStorage, type ReadPaceLimits } from '../storage/index.js';
import { applyStateFile, createServices, startOtlpPush, openEventSystem, openIdentityServices, readStateFile, openServerInstance, startUpkeep, systemClock, type Clock, type EventSystem, type EventSystemOptions, type RunningScheduler, type SchedulerTicker, type Upkeep, type WorkerConnections, type GarbageCollector, type SshServer } from '../services/index.js';
import { join } from 'node:path';
import { version } from './version.js';
import { startBuildServerWorkers, type BuildServerWorkers } from './buildServerWorkers.js';
import { startLocalWorker } from './localWorker.js';
import { openErrorReports, type ErrorReports } from './errorReports.js';
import { anonymous, CACHE_SETTINGS_REASONS, onCacheChanged, type Principal } from '../services/index.js';
import { altSvcHeaders, anonymousNarinfo, buildRoutes, cacheProtoRoute, checkedTlsFiles, eventSockets, freePort, protoRoute, RATE_WINDOW_MS, requestAuthenticator, startHttpServer, startOutboundWorkers, startServingThreads, systemTimerClock, threadAnswerCounts, threadNarServices, type CacheProtoRoute, type HttpServer, type RouteTable, type ServingThreads, type TimerClock } from '../http/index.js';

/** A running kiln server: what `kiln serve` starts and what tests start in-process. */
export interface Kiln {
  readonly url: string;
  readonly port: number;
  /** the SSH server's port (ssh.enable), else null */
  readonly sshPort: number | null;
  /** with serving threads, the main thread's loopback listener (what the threads relay to), else null */
  readonly originPort: number | null;
  /** the SSH server (ssh.enable), else null; tests sweep its connections by hand */
  readonly ssh: SshServer | null;
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
  readonly scheduler: RunningScheduler;
  /** the sign sweep, debug index, graph consistency and retention passes (tests run them by hand) */
  readonly upkeep: Upkeep;
  /** unexpected errors to errorReport.dsn (a no-op when off); `kiln serve` reports unhandled rejections with it */
  readonly errorReports: ErrorReports;
  /** garbage collection (docs/gc.md); tests call its tick() */
  readonly gc: GarbageCollector;
  /** the open_pr actions' runs (gitHostApp.enable), else null; tests on a stepped clock run a pass by hand */
  readonly openPrs: { passNow(): Promise<void> } | null;
  /** the serving threads (http.threads > 1), else null; tests crash one */
  readonly servingThreads: ServingThreads | null;
  /** the cache protocol WebSockets (docs/cache-protocol.md) */
  readonly cacheProto: CacheProtoRoute;
  /** the workers of the organizations' build servers (buildServerWorkers.ts) */
  readonly buildServers: BuildServerWorkers;
  /** the route table the server answers from (the OpenAPI test walks it) */
  readonly routes: RouteTable<Principal>;
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
  /** the clock the binary cache's access memo measures its TTLs with; a test holds it to see a change arrive without the TTL */
  cacheAccessClock?: { now(): number };
  /**
   * The clock of the services: build retry backoffs, event times and webhook attempt schedules,
   * session, key and invitation expiry (default: the system's). Tests step it.
   */
  clock?: Clock;
  /** watches serve/ directory archives being packed (tests: backpressure reaches the packer) */
  archiveProgress?: ArchiveProgress;
  /** a name's addresses for the build servers' outbound checks (default: the system resolver); tests stand in a changing DNS */
  resolve?: (name: string) => Promise<LookupAddress[]>;
  /** the clock upload.minBytesPerSec is measured with; tests move it by hand */
  bodyRateClock?: TimerClock;
  /** the minimum pace of a held NAR read from storage, in the main thread and the serving threads (default 16 KiB/s checked every 30 s); tests make it strict */
  narReadPace?: ReadPaceLimits;
  /** the scheduler's periodic pass (every second by default); tests hold it to see what alone wakes the scheduler */
  schedulerTicker?: SchedulerTicker;
  /** the Git host status reporter's first retry delay (tests make it short) */
  gitHostRetryBaseMs?: number;
  /** the open_pr runs' first retry delay (30 s by default) */
  openPrRetryBaseMs?: number;
  /** how long a private repository's link holds before .kiln-projects is read again (default 10 minutes) */
  gitHostLinkRecheckMs?: number;
  /** where a crash test holds finalize or a collection run before it kills the process (storage/nars/crashPoints.ts) */
  crashPoints?: CrashPoints;
  /** false: no background collection loop; runs happen when a test calls gc.tick() */
  gcLoop?: boolean;
  /** false: the upkeep loops wake only by hand or by event, never by their interval (tests that step the clock and run passes by hand) */
  upkeepTimers?: boolean;
  /**
   * false: no footprint-reducing collection once started or at rest (storage/restingHeap.ts). The tests' kilns
   * share the test's process, whose heap is not the server's; a pass costs 100-300 ms.
   */
  shrinkHeapAtRest?: boolean;
}

/** kiln_supervisor_restarts_total: an actor's transition carries its restart count; each increase is counted under its kind. */
function countRestarts(root: Supervisor, metrics: KilnMetrics): () => void {
  if (!metrics.enabled) return () => undefined;
  const seen = new Map<string, number>();
  return root.onTransition((t) => {
    const key = `${t.supervisor}/${t.id}`;
    const before = seen.get(key) ?? 0;
    if (t.restarts > before) metrics.supervisorRestart(t.kind, t.restarts - before);
    if (t.restarts > 0) seen.set(key, t.restarts);
    if (t.status === 'done' || t.status === 'stopped') seen.delete(key);
  });
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
    const errorReports = await openErrorReports(config, log, `kiln@${version}`);
    stack.push(() => errorReports.close());
    // Metrics are on when someone can read them: GET /metrics with metrics.tokenFile, or an OTLP collector (docs/metrics.md).
    const otlpEndpoint = config['metrics.otlp.endpoint'];
    const metrics = new KilnMetrics({ enabled: config['metrics.tokenFile'] !== null || otlpEndpoint !== null, labelTopn: config['metrics.labelTopn'] });
    if (otlpEndpoint !== null) {
      const outbound = createOutboundClient({ allowedNetworks: config['outbound.allowedNetworks'] });
      stack.push(() => outbound.close());
      const otlp = await startOtlpPush({ endpoint: otlpEndpoint, intervalSecs: config['metrics.otlp.pushIntervalSecs'], metrics, version, log, outbound });
      stack.push(() => otlp.stop());
    }
    // log.traceDir: every job's span as a JSON line (docs/metrics.md, "Stage traces").
    const tracer = openStageTracer(config['log.traceDir'], 'server');
    stack.push(() => tracer.close());
    // The stored per-minute cache traffic, whatever metrics.tokenFile says: it is for people and the UI.
    const trafficCounters = new TrafficCounters(() => clock.now().getTime());
    // The stored job phase timings, likewise (docs/metrics.md, "Stored metrics: job phases").
    const phaseSamples = new PhaseSampleBuffer(() => clock.now());
    const root = createRootSupervisor({
      onEscalate: (error) => {
        log.fatal({ err: error }, 'the supervision tree gave up; stopping');
        errorReports.report(error, { source: 'supervision tree' });
        process.exitCode = 70;
        void unwind();
      },
    });
    stack.push(() => root.stop());
    stack.push(countRestarts(root, metrics));
    // A crashed actor (restarted or given up on) is an unexpected error too.
    stack.push(root.onTransition((t) => {
      if (t.error !== undefined && (t.status === 'restarting' || t.event === 'supervisor.escalated')) {
        errorReports.report(new Error(t.error), { source: 'actor', kind: t.kind, supervisor: t.supervisor });
      }
    }));
    const rateLimiter = await openRateLimiter(config, log, opts.rateLimitClock);
    stack.push(() => rateLimiter.close());
    const secretBox = await openSecretBox(db.web, config);
    // The process's one instance lease (storage/db/advisoryLocks.ts), registered before the event
    // system and the NAR storage, which claim delivery attempts and staged uploads under its key,
    // and so closed after them: the lease outlives everything this process works on.
    const instance = await openServerInstance(db.scheduler);
    stack.push(() => instance.close());
    // Opened before the services that emit into it (accounts, projects, …).
    const events = await openEventSystem(
      { config, db, boss: queue, root, secretBox, log: componentLogger(log, 'scheduler'), userAgent: `kiln/${version}`, clock, leaseKey: instance.leaseKey, metrics },
      opts.events,
    );
    stack.push(() => events.close());
    const identity = await openIdentityServices({ sql: db.web, config, log: componentLogger(log, 'web'), clock, events: events.events });
    stack.push(() => identity.close());
    if (opts.stateFile) {
      await applyStateFile(
        // The scheduler has not started: its first pass sees every evaluation parked for want of a cache.
        { sql: db.web, config, log: componentLogger(log, 'web'), clock, secretBox, events: events.events, onSubscriptionApproved: () => undefined },
        readStateFile(opts.stateFile),
      );
    }
    const blobs = await openBlobStore(config);
    stack.push(() => blobs.close());
    const nars = openNarStorage({ sql: db.cache, blobs, cpu: pool, config, log: componentLogger(log, 'cache'), leaseKey: instance.leaseKey, ...(opts.crashPoints ? { crashPoints: opts.crashPoints } : {}), ...(opts.narReadPace ? { readPace: opts.narReadPace } : {}) });
    stack.push(() => nars.close());
    const services = createServices(
      { config, log, clock, version, db, root, rateLimiter, secretBox, events, identity, blobs, instance, nars, metrics, cpu: pool, trafficCounters, phaseSamples, tracer },
      {
        ...(opts.schedulerTicker ? { schedulerTicker: opts.schedulerTicker } : {}),
        ...(opts.cacheAccessClock ? { cacheAccessClock: opts.cacheAccessClock } : {}),
        ...(opts.archiveProgress ? { archiveProgress: opts.archiveProgress } : {}),
        ...(opts.resolve ? { resolve: opts.resolve } : {}),
        ...(opts.gitHostRetryBaseMs !== undefined ? { gitHostRetryBaseMs: opts.gitHostRetryBaseMs } : {}),
        ...(opts.gitHostLinkRecheckMs !== undefined ? { gitHostLinkRecheckMs: opts.gitHostLinkRecheckMs } : {}),
        ...(opts.openPrRetryBaseMs !== undefined ? { openPrRetryBaseMs: opts.openPrRetryBaseMs } : {}),
        ...(opts.gcLoop === false ? { gcLoop: false } : {}),
        ...(opts.crashPoints ? { crashPoints: opts.crashPoints } : {}),
      },
    );
    const { scheduler, workers } = services;
    scheduler.start();
    stack.push(() => scheduler.stop());
    const upkeep = startUpkeep({
      config, log: componentLogger(log, 'cache'), clock, cacheSql: db.cache, sql: db.scheduler, secretBox, nars, blobs, bus: events.bus, trafficCounters, phaseSamples, workers,
      supervisor: root.supervise({ id: 'upkeep', restartBudget: { maxRestarts: 100, withinMs: 10_000 } }),
      ...(opts.upkeepTimers === false ? { timers: false } : {}),
    });
    stack.push(() => upkeep.stop());
    const poller = services.gitHosts.poller;
    poller.start();
    stack.push(() => poller.stop());
    const reporter = services.gitHosts.reporter;
    if (reporter) {
      reporter.start();
      stack.push(() => reporter.stop());
    }
    const openPrs = services.gitHosts.openPrs;
    if (openPrs) {
      openPrs.start();
      stack.push(() => openPrs.stop());
    }
    services.gc.collector.start();
    stack.push(() => services.gc.collector.stop());
    const sockets = eventSockets({
      bus: events.bus, streams: services.streams, authenticateToken: services.tokens.authenticateToken,
      trustedProxies: config['http.trustedProxies'], log: componentLogger(log, 'web'),
      actorTransitions: (listener) => root.onTransition(listener),
      ...(opts.firehoseLagBytes ? { lagBytes: opts.firehoseLagBytes } : {}),
    });
    const proto = protoRoute({
      auth: services.workerAuth, workers, log: componentLogger(log, 'proto'), software: `kiln ${version}`,
      maxConnections: config['proto.maxConnections'], discoverable: config['proto.discoverable'],
      heartbeatTimeoutSecs: config['proto.workerHeartbeatTimeoutSecs'],
      narChunkBytes: config['nar.chunkBytes'], narSendChunkTimeoutSecs: config['nar.sendChunkTimeoutSecs'],
      ...(opts.protoHandshakeTimeoutSecs ? { handshakeTimeoutSecs: opts.protoHandshakeTimeoutSecs } : {}),
    });
    // The cache protocol WebSocket; with serving threads it too is relayed here.
    const cacheProto = cacheProtoRoute({
      services, log: componentLogger(log, 'cache'), trustedProxies: config['http.trustedProxies'],
      anonymousEnabled: config['proto.anonymousCache.enable'], maxAnonymousPerAddress: config['proto.anonymousCache.maxConnectionsPerIp'],
      maxConnections: config['proto.maxConnections'],
    });
    const cacheProtoForgets = onCacheChanged(events.bus, CACHE_SETTINGS_REASONS, (change) => cacheProto.cacheChanged(change.cache));
    // TLS ends in the serving threads, at least one of them; with threads the main thread listens on loopback only.
    const tls = config['tls.certFile'] === null || config['tls.keyFile'] === null ? null : checkedTlsFiles(config['tls.certFile'], config['tls.keyFile']);
    const threads = config['http.threads'];
    const threaded = threads > 1 || tls !== null;
    let servingThreads: ServingThreads | null = null;
    const routes = buildRoutes(services);
    const http: HttpServer = await startHttpServer({
      listenAddr: config['listenAddr'],
      port: threaded && config['port'] === 0 ? await freePort(config['listenAddr']) : config['port'],
      origin: threaded,
      // With serving threads the main thread keeps only its loopback listener: the threads take
      // every connection (docs/http.md, "Serving threads", "Where connections go").
      public: !threaded,
      maxRequestSize: config['http.maxRequestSize'],
      trustedProxies: config['http.trustedProxies'],
      alwaysHeaders: altSvcHeaders(config),
      minimumBodyRate: {
        limits: { bytesPerSec: config['upload.minBytesPerSec'], windowMs: RATE_WINDOW_MS },
        clock: opts.bodyRateClock ?? systemTimerClock,
      },
      log: componentLogger(log, 'web'),
      routes,
      anonymous,
      authenticate: requestAuthenticator(services.tokens),
      onUnexpectedError: (error, context) => errorReports.report(error, { source: 'request', ...context }),
      ...(metrics.enabled ? { observe: (group: string, method: string, status: number, seconds: number) => metrics.httpRequest(group, method, status, seconds) } : {}),
      websockets: (app) => {
        sockets.register(app);
        proto.register(app);
        cacheProto.register(app);
      },
    });
    stack.push(() => http.close());
    if (threaded) {
      const serving = await startServingThreads({
        count: threads, listenAddr: config['listenAddr'], port: http.port, originPort: http.originPort!, log: componentLogger(log, 'web'),
        ...(tls === null ? {} : { tls }),
        narinfos: anonymousNarinfo(services),
        // With S3 the route redirects large files to a presigned URL: the threads leave NARs to it.
        ...(config['s3.enable'] ? {} : { nars: threadNarServices(services) }),
        answers: threadAnswerCounts(services, nars, metrics.enabled ? (group, method, status, seconds) => metrics.httpRequest(group, method, status, seconds) : undefined),
        smallNars: { maxFileBytes: config['nar.smallBytes'], hotCacheBytes: config['nar.hotCacheBytes'] },
        supervisor: root.supervise({ id: 'http-threads', restartBudget: { maxRestarts: 5 * threads, withinMs: 10_000 } }),
      });
      // Before the main thread's listener closes: a thread relays to it until it has stopped.
      stack.push(() => serving.stop());
      const unforget = nars.reads.onForget((cacheId, hashPart, fileHash) => serving.broadcast({ t: 'forgetPath', cacheId, hashPart, ...(fileHash === undefined ? {} : { fileHash }) }));
      const unchanged = onCacheChanged(events.bus, CACHE_SETTINGS_REASONS, (change) => serving.broadcast({ t: 'forgetCache', cache: change.cache }));
      // A scrape or a traffic flush first has the threads report what they answered since their last batch.
      const collect = () => serving.collectReports();
      const uncollected = [metrics.beforeReading.add(collect), trafficCounters.beforeTaking.add(collect)];
      stack.push(() => {
        unforget();
        unchanged();
        for (const remove of uncollected) remove();
      });
      servingThreads = serving;
    }
    stack.push(() => services.logFeed.close()); // before the HTTP server waits for its requests: live logs end
    stack.push(() => proto.close());
    stack.push(() => {
      cacheProtoForgets();
      cacheProto.close();
    });
    stack.push(() => sockets.close());
    const outbound = startOutboundWorkers({
      proto, targets: () => services.access.workerRegistrations.outboundTargets(), isLeader: () => scheduler.isLeader, log: componentLogger(log, 'proto'),
    });
    stack.push(() => outbound.stop());
    const buildServers = startBuildServerWorkers({
      // build.runOnBuildServers: off, no server gets a worker (servers are stored and checked only)
      port: http.port, dir: join(config['baseDir'], 'build-servers'),
      targets: config['build.runOnBuildServers'] ? () => services.access.servers.targets() : () => Promise.resolve([]),
      passes: services.buildServerPasses, isLeader: () => scheduler.isLeader, log: componentLogger(log, 'proto'),
    });
    stack.push(() => buildServers.stop());
    if (config['worker.enable']) {
      // worker.baseDir's default is a system path; the local worker of a dev server lives under baseDir.
      const workerDir = loaded.sourceOf('worker.baseDir').kind === 'default' ? join(config['baseDir'], 'worker') : config['worker.baseDir'];
      // With threads (or TLS) the local worker uses the main thread's loopback listener, not a thread's relay.
      const localWorker = startLocalWorker({ port: threaded ? http.originPort! : http.port, baseDir: workerDir, log: componentLogger(log, 'proto') });
      if (localWorker) stack.push(() => localWorker.stop());
    }
    let ssh: SshServer | null = null;
    if (config['ssh.enable']) {
      const started = await services.ssh.start();
      ssh = started;
      stack.push(() => started.close());
    }
    const host = config['listenAddr'].includes(':') ? `[${config['listenAddr']}]` : config['listenAddr'];
    const url = `${tls === null ? 'http' : 'https'}://${host === '0.0.0.0' ? '127.0.0.1' : host}:${http.port}`;
    log.info({ url, version }, 'kiln is serving');
    // Start-up is over: the young generation its module loading grew goes back, and again after
    // each later burst once the server is at rest (storage/restingHeap.ts).
    if (opts.shrinkHeapAtRest !== false) {
      shrinkHeapAtRest();
      stack.push(watchHeapAtRest());
    }
    return { url, port: http.port, originPort: http.originPort ?? null, sshPort: ssh?.port ?? null, ssh, db, root, log, nars, events, workers, scheduler, upkeep, errorReports, gc: services.gc.collector, openPrs: services.gitHosts.openPrs, servingThreads, cacheProto, buildServers, routes, stop: unwind };
  } catch (e) {
    await unwind();
    throw e;
  }
}
