// Defaults computed from other options.
import { isIPv6 } from 'node:net';
import { availableParallelism } from 'node:os';
import type { OptionPath, ValueOf } from './registry.js';

/** Reads another option's effective value while a derived default is computed. */
export type Resolve = <P extends OptionPath>(path: P) => ValueOf<P>;

export type DerivedDefaults = { readonly [P in OptionPath]?: (get: Resolve) => ValueOf<P> };

/** Where systemd puts the Nix daemon; build cgroups are delegated below it. */
const nixDaemonCgroup = '/sys/fs/cgroup/system.slice/nix-daemon.service';

/** Nix's system type of this host: x86_64-linux, aarch64-linux, … */
export function hostSystem(): string {
  const cpu = ({ x64: 'x86_64', arm64: 'aarch64', ia32: 'i686', riscv64: 'riscv64' } as Record<string, string>)[process.arch] ?? process.arch;
  return `${cpu}-${process.platform === 'darwin' ? 'darwin' : 'linux'}`;
}

function serveUrl(get: Resolve): string {
  const scheme = get('useTls') ? 'https' : 'http';
  const domain = get('domain');
  if (domain !== null) return `${scheme}://${domain}`;
  const address = get('listenAddr');
  // A wildcard address is where kiln listens, not where anyone can reach it.
  const host = address === '0.0.0.0' || address === '::' ? 'localhost' : isIPv6(address) ? `[${address}]` : address;
  return `${scheme}://${host}:${get('port')}`;
}

/** The computations behind every default declared `derived(…)`; a test keeps the two lists equal. */
export const derivedDefaults: DerivedDefaults = {
  serveUrl,
  'frontend.url': (get) => get('serveUrl'),
  localWorker: (get) => get('worker.enable'),
  'reverseProxy.proxyB.enable': (get) => !get('reverseProxy.proxyA.enable'),
  // Each build holds one daemon connection plus up to 8 for parallel imports.
  'worker.nixDaemon.maxConnections': (get) => get('worker.build.maxConcurrent') * 9 + 16,
  'worker.build.cgroup': (get) => (get('worker.build.metrics') ? nixDaemonCgroup : null),
  'worker.system.architectures': () => [hostSystem()],
  // One serving thread per core (docs/http.md, "Serving threads"); 1 on a one-core machine keeps the single event loop.
  'http.threads': () => Math.min(64, availableParallelism()),
};
