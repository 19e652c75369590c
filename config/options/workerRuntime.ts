// Registry options of the kiln worker at work: worker.log.*, worker.nar.*, worker.nixDaemon.*, worker.system.* and more.
import { bool, int, unsignedInt, positiveInt, str, path, stringList, level, lines, pkg, nullable } from '../kinds.js';
import { option, derived, deploymentOnly } from '../option.js';

/** The `kiln worker` process: logs, NAR transfer, the Nix daemon, packages, reverse proxies and the host system. */
export const workerRuntimeOptions = {
  'worker.log.burstBytesPerMin': option(
    unsignedInt(), 8388608,
    'build log bytes forwarded per build in any minute; beyond it forwarding stops but the build continues',
  ),
  'worker.log.sustainedBytesPerHour': option(unsignedInt(), 67108864, 'build log bytes forwarded per build in any hour'),
  'worker.log.fetchFromStore': option(bool(), true, 'forward the stored log of a derivation already built locally'),
  'worker.log.level.default': option(level(), 'info', 'default level'),
  'worker.log.level.build': option(nullable(level()), null, 'per-component level; null uses the default'),
  'worker.log.level.eval': option(nullable(level()), null, 'per-component level; null uses the default'),
  'worker.log.level.proto': option(nullable(level()), null, 'per-component level; null uses the default'),
  'worker.log.traceDir': option(
    nullable(path()), null,
    'directory for stage spans as JSON lines, one file per process; null disables',
  ),
  'worker.nar.chunkBytes': option(int({ min: 4096, max: 4194304 }), 524288, 'size of each outbound NAR upload chunk'),
  'worker.nar.maxConcurrentUploads': option(
    positiveInt(), 16,
    'upload requests over 1 MiB open at once; one job holds at most half; smaller uploads have their own window of 128',
  ),
  'worker.nar.partialTtlSecs': option(
    unsignedInt(), 86400,
    'seconds after last write before an unfinished NAR download under <worker.baseDir>/nar-partial is deleted; 0 disables cleanup',
  ),
  'worker.nixDaemon.maxConnections': option(
    positiveInt(), derived('worker.build.maxConcurrent * 9 + 16'),
    'maximum connections to the local package manager daemon; each build holds one plus up to 8 for parallel imports',
  ),
  'worker.system.architectures': option(
    stringList(), derived('the host\'s system: x86_64-linux or aarch64-linux'),
    'system types this worker builds for',
  ),
  'worker.system.cpuCoreScore': option(
    nullable(positiveInt()), null,
    'single-core speed score advertised to the scheduler (higher is faster); null benchmarks at startup',
  ),
  'worker.system.features': option(
    stringList(), [],
    'system features advertised; empty detects them at runtime from the package manager\'s configuration, including CPU-derived levels',
  ),
  'worker.system.minFreeRamMb': option(
    unsignedInt(), 0,
    'free memory in MiB below which the worker kills the one evaluation subprocess large enough to restore the margin and reports that evaluation failed; 0 uses 10% of total memory clamped to 128 MiB to 1 GiB',
  ),
  'worker.packages.git': option(pkg(), null, 'git package; null lets the deployment derive it', deploymentOnly),
  'worker.packages.gradient': option(pkg(), null, 'the kiln package; null lets the deployment derive it', deploymentOnly),
  'worker.packages.nix': option(
    pkg(), null,
    'the package manager used to detect system features; null lets the deployment use the service\'s patched build',
    deploymentOnly,
  ),
  'worker.packages.ssh': option(
    pkg(), null,
    'SSH package, used as the SSH command for private flake inputs; null lets the deployment derive it',
    deploymentOnly,
  ),
  'worker.reverseProxy.proxyA.enable': option(
    bool(), false,
    'virtual host for the first supported proxy in front of the worker listener',
    deploymentOnly,
  ),
  'worker.reverseProxy.proxyA.extraConfig': option(lines(), '', 'extra lines appended after that proxy setup', deploymentOnly),
  'worker.reverseProxy.proxyA.useCertHost': option(
    nullable(str()), null,
    'host of an existing certificate to use instead of requesting one; null leaves certificates to the proxy',
    deploymentOnly,
  ),
  'worker.reverseProxy.proxyB.enable': option(
    bool(), false,
    'virtual host for the second supported proxy in front of the worker listener',
    deploymentOnly,
  ),
};
