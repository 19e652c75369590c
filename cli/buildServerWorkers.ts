// The workers of build servers (docs/builds.md, "Build servers"): for every active server of an
// organization whose host key is pinned, `kiln serve` runs one `kiln worker` child connected to
// its own /proto on loopback. The worker builds only, for the organization's projects (a pass of
// services/workers/buildServerPasses.ts), advertises the server record's systems, features and
// max_jobs, and runs every build with Nix's remote building on that server
// (worker.build.builders): inputs copied there over SSH, built there, outputs copied back and
// pushed to the project's caches. So the scheduler, the job lifecycle, its events and retries are
// those of any /proto worker.
//
// Store: each worker runs on a Nix store of its own under its directory (worker.storeRoot), so a
// server's outputs, which Nix takes back unverified, are valid nowhere else on this machine: not
// for the local worker, not for another server's worker. It goes with the directory when the
// worker stops or starts again.
//
// SSH: the organization's key and a known_hosts file holding only the pinned key, with strict
// checking, reach the child through NIX_SSHOPTS. A server whose key changed refuses every build
// until an admin checks it again, which pins the new key; the next reading restarts the worker.
//
// Address: the server's name is resolved and checked against outbound.allowedNetworks each time
// the servers are read, and the worker's ssh gets a checked address, never the name, so a name
// that resolves elsewhere at connect time (DNS rebinding) is never reached. A name that now
// resolves to a refused address stops the worker at the next reading.
//
// The process that holds the scheduler lock runs them, so several server processes do not run a
// worker each for the same server; the registrations are read every intervalMs, and a worker
// whose server changed (address, key, systems, projects) is started again.
import { createHash } from 'node:crypto';
import { chmodSync, lstatSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '../config/index.js';
import type { BuildServerPasses, BuildServerTarget } from '../services/index.js';
import { superviseWorkerChild, type WorkerChild } from './workerChild.js';

export interface BuildServerWorkersOptions {
  /** the port of this server's /proto */
  port: number;
  /** where each worker keeps its state: `<dir>/<server id>/` */
  dir: string;
  targets(): Promise<BuildServerTarget[]>;
  passes: BuildServerPasses;
  isLeader(): boolean;
  log: Logger;
  intervalMs?: number;
}

export interface BuildServerWorkers {
  /** reads the servers now instead of at the next interval */
  refresh(): Promise<void>;
  /** the ids of the servers a worker runs for */
  running(): string[];
  stop(): Promise<void>;
}

/** A name every SSH connection uses for the server's key, so known_hosts needs no `[host]:port` form. */
const HOST_KEY_ALIAS = 'kiln-build-server';

interface Running {
  /** what the worker was started with but its address; another value restarts it */
  shape: string;
  /** the checked address its ssh connects to */
  address: string;
  child: WorkerChild;
}

/**
 * Nix's builders line for the server: `ssh://user@address systems key maxJobs speed features`.
 * The address is one the server's name resolved to and outbound.allowedNetworks allows, never the
 * name: ssh would resolve it again at every connection, maybe to somewhere else (DNS rebinding).
 * The pinned key is found under HOST_KEY_ALIAS, whatever the address.
 */
export function buildersLine(target: BuildServerTarget, address: string, identityFile: string): string {
  const features = target.features.length > 0 ? target.features.join(',') : '-';
  return `ssh://${target.username}@${address} ${target.architectures.join(',')} ${identityFile} ${target.maxJobs} 1 ${features}`;
}

/** ssh options for every connection to the server: its port, only the pinned key, no prompt. */
export function sshOptions(target: BuildServerTarget, knownHostsFile: string): string {
  return [
    `-p ${target.port}`, `-oHostKeyAlias=${HOST_KEY_ALIAS}`, `-oUserKnownHostsFile=${knownHostsFile}`, '-oGlobalKnownHostsFile=/dev/null',
    '-oStrictHostKeyChecking=yes', '-oIdentitiesOnly=yes', '-oBatchMode=yes', '-oConnectTimeout=15',
  ].join(' ');
}

/**
 * Removes a worker's directory, its Nix store included: store directories are read-only (0555),
 * which stops a non-root remove, so they are made writable first.
 */
export function removeWorkerDir(dir: string): void {
  try {
    rmSync(dir, { recursive: true, force: true });
  } catch {
    const writable = (path: string) => {
      if (!lstatSync(path).isDirectory()) return;
      chmodSync(path, 0o700);
      for (const entry of readdirSync(path)) writable(join(path, entry));
    };
    writable(dir);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Everything the worker is started with but the address, which may change without a restart while the old one stays allowed. */
const shapeOf = ({ addresses: _addresses, ...target }: BuildServerTarget): string => createHash('sha256').update(JSON.stringify(target)).digest('hex');

export function startBuildServerWorkers(opts: BuildServerWorkersOptions): BuildServerWorkers {
  const running = new Map<string, Running>();
  let stopped = false;
  let reading: Promise<void> = Promise.resolve();

  const stopOne = async (serverId: string) => {
    const entry = running.get(serverId);
    if (!entry) return;
    running.delete(serverId);
    opts.passes.revoke(serverId);
    await entry.child.stop();
    removeWorkerDir(join(opts.dir, serverId));
  };

  const launch = (target: BuildServerTarget, address: string): WorkerChild | null => {
    const dir = join(opts.dir, target.serverId);
    // NIX_SSHOPTS is split at spaces: a path with one cannot be passed.
    if (/\s/.test(dir)) {
      opts.log.error({ server: target.label, dir }, 'the build server\'s worker directory has a space in its path; no worker runs for it');
      return null;
    }
    removeWorkerDir(dir);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const identityFile = join(dir, 'id_ssh');
    const knownHosts = join(dir, 'known_hosts');
    const peersFile = join(dir, 'peers');
    writeFileSync(identityFile, target.privateKey.endsWith('\n') ? target.privateKey : `${target.privateKey}\n`, { mode: 0o600 });
    writeFileSync(knownHosts, `${HOST_KEY_ALIAS} ${target.hostKey}\n`, { mode: 0o600 });
    writeFileSync(peersFile, `*:${opts.passes.admit(target.serverId, target.projectIds)}\n`, { mode: 0o600 });
    return superviseWorkerChild({
      args: [
        '--server-url', `ws://127.0.0.1:${opts.port}/proto`, '--base-dir', join(dir, 'state'), '--id', target.serverId,
        '--peers-file', peersFile, '--gcroots-dir', join(dir, 'gcroots'),
        // A store of its own: what the server sends back never enters this machine's store (worker/ownStore.ts).
        '--store-root', join(dir, 'store'),
        '--no-capabilities-eval', '--no-capabilities-fetch', '--capabilities-build',
        '--system-architectures', target.architectures.join(','), '--system-features', target.features.join(','),
        '--build-max-concurrent', String(target.maxJobs), '--build-builders', buildersLine(target, address, identityFile),
      ],
      env: { ...process.env, NIX_SSHOPTS: sshOptions(target, knownHosts) },
      log: opts.log,
      fields: { worker: target.serverId, kind: 'build server', server: target.label },
    });
  };

  const reconcile = async () => {
    const wanted = stopped || !opts.isLeader() ? [] : await opts.targets();
    const ids = new Set(wanted.map((t) => t.serverId));
    for (const id of [...running.keys()]) if (!ids.has(id)) await stopOne(id);
    for (const target of wanted) {
      const shape = shapeOf(target);
      const current = running.get(target.serverId);
      // The worker keeps its address while the name still resolves to it (round-robin DNS does not restart it).
      if (current?.shape === shape && target.addresses.includes(current.address)) continue;
      await stopOne(target.serverId);
      if (stopped) return;
      const address = target.addresses[0];
      if (address === undefined) continue;
      const child = launch(target, address);
      if (child) running.set(target.serverId, { shape, address, child });
    }
  };
  const refresh = () => {
    reading = reading.then(reconcile).catch((error: unknown) => opts.log.error({ err: error }, 'starting the build servers\' workers failed'));
    return reading;
  };
  const timer = setInterval(() => void refresh(), opts.intervalMs ?? 5000);
  timer.unref();
  void refresh();

  return {
    refresh,
    running: () => [...running.keys()],
    async stop() {
      stopped = true;
      clearInterval(timer);
      await refresh();
    },
  };
}
