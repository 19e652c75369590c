// One `kiln worker` child process of `kiln serve`, restarted with a doubling backoff capped at
// 60 s when it exits: the local worker (localWorker.ts) and the workers of build servers
// (buildServerWorkers.ts).
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Logger } from '../config/index.js';

const MAX_BACKOFF_MS = 60_000;
const entry = fileURLToPath(new URL('../bin/kiln.js', import.meta.url));

export interface WorkerChildOptions {
  /** the arguments after `kiln worker` */
  args: readonly string[];
  env?: NodeJS.ProcessEnv;
  log: Logger;
  /** what the log lines call it */
  fields: Record<string, unknown>;
}

export interface WorkerChild {
  stop(): Promise<void>;
}

export function superviseWorkerChild(opts: WorkerChildOptions): WorkerChild {
  let child: ChildProcess | null = null;
  let stopped = false;
  let backoff = 1000;
  let timer: NodeJS.Timeout | null = null;

  const launch = () => {
    const startedAt = Date.now();
    child = spawn(process.execPath, [entry, 'worker', ...opts.args], { stdio: ['ignore', 'inherit', 'inherit'], ...(opts.env ? { env: opts.env } : {}) });
    opts.log.info({ ...opts.fields, pid: child.pid }, 'worker process started');
    child.once('exit', (code, signal) => {
      child = null;
      if (stopped) return;
      // A worker that ran for a while starts over at 1 s; one that keeps failing backs off.
      if (Date.now() - startedAt > MAX_BACKOFF_MS) backoff = 1000;
      opts.log.warn({ ...opts.fields, code, signal, retryInMs: backoff }, 'a worker process exited; restarting it');
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
