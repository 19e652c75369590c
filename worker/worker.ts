// The `kiln worker` process: identity, then connect → handshake → serve jobs, and after every
// lost connection a reconnect with exponential backoff (at most 60 s) until stopped.
import { mkdir } from 'node:fs/promises';
import { componentLogger, openStageTracer, type Config, type Logger } from '../config/index.js';
import type { PeerTokens, WorkerHello } from '../protocol/index.js';
import { backoffDelayMs } from './backoff.js';
import { measureCpuCoreScore } from './cpuCoreScore.js';
import { acceptServer, connect, HandshakeRejected, type ProtoConnection } from './connection.js';
import { listenForServers, type ServerListener } from './serverListener.js';
import { readAcceptedServerTokens } from './serverTokens.js';
import { detectSystemFeatures, hostCores, hostMemoryBytes, loadMetrics, loadWorkerId, readPeers, storeFreeBytes } from './identity.js';
import { JobRunner } from './jobRunner.js';
import { nixSandboxMode, sandboxWarning } from './nixSandbox.js';
import { sweepPartialDownloads } from './partialDownloads.js';
import { ensurePrivateDirectory, secureWorkerBaseDir } from './privateDirectories.js';
import { insecureListenerProblem, insecureTransportProblem } from './transportSecurity.js';
import { effectiveOomScore } from './oomScore.js';
import { workerSettings, type WorkerSettings } from './settings.js';
import { storeConnections } from './storeConnections.js';

export interface RunningWorker {
  readonly id: string;
  /** the port servers connect to (worker.discoverable), else null */
  readonly listenPort: number | null;
  /** cancels running jobs, closes the connection and stops reconnecting */
  stop(): Promise<void>;
}

export interface StartWorkerOptions {
  log: Logger;
  /** kiln's version, announced in the hello */
  software: string;
  env?: NodeJS.ProcessEnv;
}

async function buildHello(settings: WorkerSettings, id: string, software: string): Promise<WorkerHello> {
  // A worker that builds on other machines (worker.build.builders) has their features, never this one's.
  const systemFeatures = settings.systemFeatures.length > 0 || settings.builders !== null ? settings.systemFeatures : await detectSystemFeatures(settings.childEnv);
  return {
    workerId: id,
    software,
    capabilities: settings.capabilities,
    architectures: settings.architectures,
    systemFeatures,
    maxConcurrentBuilds: settings.maxConcurrentBuilds,
    maxConcurrentEvals: settings.maxConcurrentEvals,
    cpuCores: hostCores(),
    cpuCoreScore: settings.cpuCoreScore ?? measureCpuCoreScore(),
    memoryBytes: hostMemoryBytes(),
    zone: settings.zone,
    ...(settings.endpoint === null ? {} : { endpoint: settings.endpoint }),
  };
}

/** worker.nar.partialTtlSecs: abandoned downloads are removed at start and then every min(TTL, an hour). */
function startPartialSweeps(settings: WorkerSettings, log: Logger): NodeJS.Timeout | null {
  if (settings.partialTtlMs === 0) return null;
  const sweep = () => void sweepPartialDownloads(settings.baseDir, settings.partialTtlMs, new Date()).then(
    (removed) => { if (removed.length > 0) log.info({ removed }, 'removed downloads a stopped worker left unfinished (worker.nar.partialTtlSecs)'); },
    (e: unknown) => log.warn({ err: e instanceof Error ? e.message : String(e) }, 'sweeping unfinished downloads failed'),
  );
  sweep();
  const timer = setInterval(sweep, Math.min(settings.partialTtlMs, 3_600_000));
  timer.unref();
  return timer;
}

export async function startWorker(config: Config, options: StartWorkerOptions): Promise<RunningWorker> {
  const configured = workerSettings(config, options.env);
  const settings = { ...configured, oomScoreAdjust: effectiveOomScore(configured.oomScoreAdjust, (message) => options.log.warn(message)) };
  storeConnections.setLimit(settings.storeConnections);
  const serverUrl = settings.serverUrl;
  if (serverUrl === null && !settings.discoverable) {
    throw new Error('worker.serverUrl is not set (--server-url ws://host:port/proto) and the worker is not discoverable (--discoverable): it would never meet a server');
  }
  // Tenants' clones and scratch files live here: owner-only before the first job (docs/worker.md).
  for (const path of await secureWorkerBaseDir(settings.baseDir)) options.log.warn({ path }, 'took group and other permissions off this entry of worker.baseDir: only the worker may read it');
  // Nix sets its own umask (022), so what it caches of tenants' flakes is private by this directory's mode only.
  await ensurePrivateDirectory(settings.evalCacheDir);
  const id = await loadWorkerId(settings.baseDir, settings.id);
  const sweepTimer = startPartialSweeps(settings, options.log);
  const peers = await readPeers(settings.peersFile);
  const insecure = (serverUrl === null ? undefined : insecureTransportProblem(serverUrl, peers, settings.useTls))
    ?? (settings.discoverable ? insecureListenerProblem(settings.listenAddr, settings.useTls) : undefined);
  if (insecure) throw new Error(insecure);
  if (settings.gcrootsDir === '') {
    options.log.warn('worker.gcrootsDir is empty: running builds\' paths are not pinned, so a collection may take their inputs, and on a worker several organizations share the store checks can race with another job letting go of paths (docs/worker.md)');
  }
  if (!settings.useTls) options.log.warn('worker.useTls is off: peer and server tokens may cross the network in the clear; only for a network you trust');
  const accepted = settings.discoverable && settings.acceptedServerTokensFile !== null ? await readAcceptedServerTokens(settings.acceptedServerTokensFile) : null;
  const hello = await buildHello(settings, id, options.software);
  const log = options.log.child({ workerId: id });
  const sandbox = sandboxWarning(await nixSandboxMode(settings.childEnv));
  if (sandbox) log.warn(sandbox);
  const protoLog = componentLogger(log, 'proto');
  const tracer = openStageTracer(settings.traceDir, 'worker');
  const runner = new JobRunner(settings, { eval: componentLogger(log, 'eval'), build: componentLogger(log, 'build') }, tracer);

  // A store of its own (worker.storeRoot) is made by its first Nix command; its root is there from the start.
  if (settings.storeRoot !== null) await mkdir(settings.storeRoot, { recursive: true, mode: 0o700 });
  const storeDir = settings.storeRoot ?? undefined;
  let storeFree: number | null = await storeFreeBytes(storeDir);
  const storeTimer = setInterval(() => void storeFreeBytes(storeDir).then((bytes) => (storeFree = bytes)), 30_000);
  storeTimer.unref();

  let stopping = false;
  let current: ProtoConnection | undefined;
  let wake: (() => void) | undefined;
  const sleep = (ms: number) => new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    wake = () => {
      clearTimeout(timer);
      resolve();
    };
  });

  const load = () => loadMetrics(runner.count('build'), runner.count('eval'), storeFree);
  const builds = () => runner.readings.snapshot();
  // A server that connects here (worker.discoverable) gets the same handshake; jobs run on whichever connection is open.
  let listener: ServerListener | null = null;
  if (settings.discoverable) {
    if (accepted === null) protoLog.warn('worker.acceptedServerTokensFile is not set: every server that reaches this port may connect');
    listener = await listenForServers({
      listenAddr: settings.listenAddr, port: settings.port, accepted, log: protoLog,
      busy: () => current !== undefined,
      onServer: (socket, address) => {
        void acceptServer(socket, { url: `ws://${address}`, hello, peers, log: protoLog, load, builds }).then(async (connection) => {
          current = connection;
          protoLog.info({ address, projects: connection.welcome.projects.length }, 'a server connected and accepted this worker');
          runner.attach(connection);
          const closed = await connection.closed;
          if (current === connection) current = undefined;
          if (!stopping) protoLog.warn({ code: closed.code, reason: closed.reason }, 'the server\'s connection was lost');
        }, (e: unknown) => protoLog.warn({ address, err: e instanceof Error ? e.message : String(e) }, 'a server\'s handshake failed'));
      },
    });
    protoLog.info({ listenAddr: settings.listenAddr, port: listener.port }, 'waiting for servers to connect (worker.discoverable)');
  }

  const loop = (async () => {
    let attempt = 0;
    while (!stopping && serverUrl !== null) {
      try {
        const connection = await connect({ url: serverUrl, hello, peers, log: protoLog, load, builds });
        if (stopping) {
          connection.close('shutting_down', 'the worker is stopping');
          break;
        }
        current = connection;
        attempt = 0;
        protoLog.info({ projects: connection.welcome.projects.length, open: connection.welcome.open }, 'accepted by the server');
        runner.attach(connection);
        const closed = await connection.closed;
        current = undefined;
        if (!stopping) protoLog.warn({ code: closed.code, reason: closed.reason }, 'the connection to the server was lost');
      } catch (e) {
        if (e instanceof HandshakeRejected) protoLog.error({ code: e.code, reason: e.reason }, 'the server refused this worker');
        else protoLog.warn({ err: e instanceof Error ? e.message : String(e) }, 'cannot reach the server');
      }
      if (stopping) break;
      const delayMs = backoffDelayMs(attempt++);
      protoLog.info({ delayMs, attempt }, 'reconnecting after a delay');
      await sleep(delayMs);
    }
  })();

  log.info({ serverUrl: serverUrl?.replace(/\/\/[^@/]*@/, '//[secret]@') ?? null, open: peers === null, cpuCoreScore: hello.cpuCoreScore }, 'kiln worker started');
  return {
    id,
    listenPort: listener?.port ?? null,
    async stop() {
      stopping = true;
      wake?.();
      clearInterval(storeTimer);
      if (sweepTimer) clearInterval(sweepTimer);
      await runner.stop();
      current?.close('shutting_down', 'the worker is stopping');
      await listener?.close();
      await loop;
      await tracer.close();
    },
  };
}
