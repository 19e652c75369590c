// The local worker of `kiln serve` with worker.enable (kiln.dev.json sets it): `kiln worker` as a
// child process connected to this server's /proto on loopback, in open mode (no peers file). The
// server accepts open-mode workers only from loopback and only when localWorker is on
// (services/workers/workerAuth.ts), so this needs no token. Its id is derived from the host name, so it
// stays the same across restarts. It is restarted with a doubling backoff capped at 60 s.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from '../config/index.js';

const MAX_BACKOFF_MS = 60_000;
const entry = fileURLToPath(new URL('../bin/kiln.js', import.meta.url));

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
  let child: ChildProcess | null = null;
  let stopped = false;
  let backoff = 1000;
  let timer: NodeJS.Timeout | null = null;
  const id = localWorkerId();

  const launch = () => {
    const startedAt = Date.now();
    child = spawn(process.execPath, [
      entry, 'worker', '--server-url', `ws://127.0.0.1:${opts.port}/proto`, '--base-dir', opts.baseDir, '--id', id,
      '--gcroots-dir', join(opts.baseDir, 'gcroots'),
    ], { stdio: ['ignore', 'inherit', 'inherit'] });
    opts.log.info({ worker: id, pid: child.pid }, 'local worker started');
    child.once('exit', (code, signal) => {
      child = null;
      if (stopped) return;
      // A worker that ran for a while starts over at 1 s; one that keeps failing backs off.
      if (Date.now() - startedAt > MAX_BACKOFF_MS) backoff = 1000;
      opts.log.warn({ worker: id, code, signal, retryInMs: backoff }, 'the local worker exited; restarting it');
      timer = setTimeout(launch, backoff);
      backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
    });
  };
  launch();

  return {
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      const running = child as ChildProcess | null;
      if (!running) return;
      await new Promise<void>((resolve) => {
        running.once('exit', () => resolve());
        running.kill('SIGTERM');
      });
    },
  };
}
