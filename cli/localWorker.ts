// The local worker of `kiln serve` with worker.enable (kiln.dev.json sets it): `kiln worker` as a
// child process connected to this server's /proto on loopback, in open mode (no peers file). The
// server accepts open-mode workers only from loopback and only when localWorker is on
// (services/workers/workerAuth.ts), so this needs no token. Its id is derived from the host name, so it
// stays the same across restarts. It is restarted with a doubling backoff (workerChild.ts).
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { Logger } from '../config/index.js';
import { superviseWorkerChild } from './workerChild.js';

/** A UUID-shaped id that is the same for the same host name. */
export function localWorkerId(host = hostname()): string {
  const h = createHash('sha256').update(`kiln local worker ${host}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

export function nixOnPath(): boolean {
  const run = spawnSync('nix-store', ['--version'], { stdio: 'ignore' });
  return run.status === 0;
}

export interface LocalWorkerOptions {
  port: number;
  baseDir: string;
  log: Logger;
}

export interface LocalWorker {
  stop(): Promise<void>;
}

export function startLocalWorker(opts: LocalWorkerOptions): LocalWorker | null {
  if (!nixOnPath()) {
    opts.log.warn('worker.enable is on but Nix (nix-store) is not on the PATH: no local worker runs, so evaluations wait for a remote worker. Install Nix or set worker.enable to false.');
    return null;
  }
  const id = localWorkerId();
  return superviseWorkerChild({
    args: ['--server-url', `ws://127.0.0.1:${opts.port}/proto`, '--base-dir', opts.baseDir, '--id', id, '--gcroots-dir', join(opts.baseDir, 'gcroots')],
    log: opts.log,
    fields: { worker: id, kind: 'local' },
  });
}
