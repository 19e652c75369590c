// Registry options of the kiln worker process itself (worker.*: its server, identity and tokens).
import { bool, int, positiveInt, port, str, path, url, ipAddress, attrs, uuid, nullable } from '../kinds.js';
import { option, derived, noEnv, deploymentOnly } from '../option.js';

/** The `kiln worker` process: identity, connection, builds, capabilities and evaluation. */
export const workerOptions = {
  'worker.acceptedServerTokensFile': option(
    nullable(path()), null,
    'token hashes a server must present when connecting to this worker, one peer_id:hash per line, lines starting with # ignored; a hash is an argon2 PHC string or the lowercase SHA-256 hex digest of the token; peer ID * matches any; read only with worker.discoverable; null accepts every server and logs a warning at start',
  ),
  'worker.baseDir': option(path(), '/var/lib/kiln-worker', 'worker state directory'),
  'worker.discoverable': option(bool(), false, 'accept incoming server connections on /proto'),
  'worker.domain': option(
    str(), '',
    'domain of the worker\'s proxy virtual host, used only with a reverse proxy',
    deploymentOnly,
  ),
  'worker.enable': option(bool(), false, 'enable the worker', noEnv),
  'worker.endpoint': option(
    nullable(str()), null,
    'address at which other cluster members reach this worker, passed verbatim in the cluster roster; null advertises none',
  ),
  'worker.environmentVariables': option(
    attrs(), {},
    'extra worker environment variables; null unsets',
    { env: false, mask: 'attrValues' },
  ),
  'worker.gcrootsDir': option(
    str(), '/nix/var/nix/gcroots/kiln-worker',
    'directory of indirect GC roots pinning each running build\'s inputs and outputs; empty string disables pinning',
  ),
  'worker.id': option(
    nullable(uuid()), null,
    'worker UUID; null generates one on first start and stores it in <worker.baseDir>/worker-id',
  ),
  'worker.listenAddr': option(ipAddress(), '127.0.0.1', 'IP the worker listens on for server connections'),
  'worker.peersFile': option(
    nullable(path()), null,
    'peer tokens for challenge-response authentication, one <uuid>:<token> or *:<token> per line, lines starting with # ignored; * matches any UUID in the server\'s challenge; each token is a 48-byte random secret registered via POST /api/v1/projects/{project}/workers; null connects in open mode where the server accepts the worker without a token',
  ),
  'worker.port': option(port({ listen: true }), 3100, 'listen port for server connections; 0 picks a free port'),
  'worker.serverUrl': option(
    nullable(url(['ws', 'wss'])), null,
    'WebSocket URL of the server\'s /proto endpoint; null waits for the server to connect',
    { mask: 'urlPassword' },
  ),
  'worker.storeRoot': option(
    nullable(path()), null,
    'root of a Nix store of this worker\'s own (Nix\'s chroot store local?root=<dir>, its files under <dir>/nix/store) instead of the store Nix is configured with: every Nix command of the worker runs on it and the NARs it pushes are read from it, so what its builds bring back never enters the machine\'s store; kiln sets it for the worker of an organization\'s build server; null uses the configured store',
    { extension: true },
  ),
  'worker.storeRootMaxMb': option(
    int({ min: 0, type: 'unsigned int' }), 10240,
    'with worker.storeRoot: after a build, when the files of the worker\'s own store pass this many MiB, the worker runs nix-store --gc on that store, once its builds under way have ended and before it starts new ones (what the store holds was pushed into the caches); 0 collects after every build',
    { extension: true },
  ),
  'worker.useTls': option(bool(), true, 'enable TLS', noEnv),
  'worker.zone': option(
    nullable(str()), null,
    'locality label advertised to the scheduler; a cluster job asking for one zone places all members on workers with that label; null joins the zone of all unlabelled workers',
  ),
  'worker.build.builders': option(
    nullable(str({ nonEmpty: true })), null,
    'machines every build of this worker runs on, in the syntax of Nix\'s builders setting; each build runs with --max-jobs 0, so Nix copies its inputs there over SSH, builds there and copies the outputs back before the worker pushes them; the worker then advertises worker.system.features as they are (none when empty) instead of this machine\'s; kiln sets it for the worker of an organization\'s build server; null builds on this machine',
    { extension: true },
  ),
  'worker.build.cgroup': option(
    nullable(str()), derived('/sys/fs/cgroup/system.slice/nix-daemon.service when worker.build.metrics, else null'),
    'cgroup directory of the daemon, the parent of build cgroups; the worker reads each running build\'s peak memory from it and sends it with the heartbeat; the scheduler reserves the larger of predicted and reported peak; needs worker.build.metrics and the service\'s patched package manager on the daemon; null reports nothing',
  ),
  'worker.build.maxConcurrent': option(positiveInt(), 32, 'maximum simultaneous builds'),
  'worker.build.maxCores': option(nullable(positiveInt()), null, 'CPU cores one build may use, passed as --cores; null uses all'),
  'worker.build.metrics': option(
    bool(), false,
    'record per-build peak memory, CPU time, disk I/O and out-of-memory kills (enables the package manager\'s cgroup feature and delegation to the daemon); peak memory, disk I/O and OOM kills need the patched package manager; wall-clock time is always recorded',
    noEnv,
  ),
  'worker.build.oomScoreAdjust': option(
    nullable(int({ min: -1000, max: 1000 })), 500,
    'out-of-memory score adjustment of the daemon, inherited by builds; with a positive value the kernel kills a build before the worker; evaluation subprocesses use 600 and go first; null leaves it unchanged',
    noEnv,
  ),
  'worker.capabilities.build': option(bool(), true, 'builds'),
  'worker.capabilities.eval': option(bool(), true, 'flake evaluations'),
  'worker.capabilities.federate': option(
    bool(), false,
    'forward work and NARs between workers and servers; requires discoverable',
  ),
  'worker.capabilities.fetch': option(bool(), true, 'prefetch flake inputs and sources'),
  'worker.eval.cache.dir': option(
    nullable(str()), null,
    'evaluation cache directory exported to subprocesses; null uses <worker.baseDir>/eval-cache',
  ),
  'worker.eval.cache.share': option(bool(), true, 'share evaluation cache blobs with other workers through the server'),
  'worker.eval.forkWorkers': option(
    nullable(positiveInt()), null,
    'evaluation subprocesses in the pool; null uses the host\'s core count capped at 16',
  ),
  'worker.eval.maxConcurrent': option(positiveInt(), 1, 'maximum simultaneous evaluations'),
  'worker.eval.maxRss': option(
    positiveInt(), 2147483648,
    'resident bytes above which an idle evaluation subprocess restarts after its call; a call may exceed it, guarded by worker.system.minFreeRamMb',
  ),
  'worker.eval.metrics': option(
    bool(), true,
    'collect per-evaluation statistics (thunks, heap, peak memory, hotspots, flake graph)',
  ),
};
