// A real `kiln worker` child process (node bin/kiln.js worker …) for end-to-end tests, with its
// pino log lines parsed so a test can wait for what the worker says instead of for time.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { within } from './eventually.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** Nix as the tests run it: the local store as root, no sandbox, no build users, no substituters. */
export const TEST_NIX_CONFIG = 'sandbox = false\nbuild-users-group =\nsubstituters =\n';

export interface LogLine {
  level: number;
  msg: string;
  [field: string]: unknown;
}

export interface WorkerProcess {
  readonly child: ChildProcess;
  readonly logs: LogLine[];
  /** the first log line (seen before or after the call) that satisfies `match`; fails after a minute with the last lines */
  waitForLog(match: (line: LogLine) => boolean): Promise<LogLine>;
  /** SIGTERM, then the exit code */
  stop(): Promise<number | null>;
  readonly stderr: () => string;
}

export interface SpawnWorkerOptions {
  /** absent: a discoverable worker waits for the server (pass --discoverable in args) */
  serverUrl?: string;
  baseDir: string;
  peersFile?: string;
  args?: string[];
  env?: NodeJS.ProcessEnv;
}

export function spawnWorker(options: SpawnWorkerOptions): WorkerProcess {
  const args = [
    join(root, 'bin/kiln.js'), 'worker',
    ...(options.serverUrl ? ['--server-url', options.serverUrl] : []),
    '--base-dir', options.baseDir,
    '--gcroots-dir', join(options.baseDir, 'gcroots'),
    ...(options.peersFile ? ['--peers-file', options.peersFile] : []),
    ...(options.args ?? []),
  ];
  const child = spawn(join(root, 'node_modules/.bin/node'), args, {
    cwd: root,
    env: { ...process.env, NIX_REMOTE: 'local', NIX_CONFIG: TEST_NIX_CONFIG, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: LogLine[] = [];
  const waiters: { match: (l: LogLine) => boolean; resolve: (l: LogLine) => void }[] = [];
  let partial = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8');
  child.stdout!.on('data', (text: string) => {
    const lines = (partial + text).split('\n');
    partial = lines.pop() ?? '';
    for (const raw of lines) {
      if (!raw.trim()) continue;
      let line: LogLine;
      try {
        line = JSON.parse(raw) as LogLine;
      } catch {
        line = { level: 30, msg: raw };
      }
      logs.push(line);
      for (let i = waiters.length - 1; i >= 0; i--) {
        if (waiters[i]!.match(line)) waiters.splice(i, 1)[0]!.resolve(line);
      }
    }
  });
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (text: string) => (stderr += text));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  // after its output is read to the end: a line it never wrote will not come
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const lastLines = () => `the last lines were ${JSON.stringify(logs.slice(-8).map((l) => l.msg))}, stderr ${JSON.stringify(stderr.slice(-1000))}`;
  return {
    child,
    logs,
    waitForLog: (match) => {
      const seen = logs.find(match);
      if (seen) return Promise.resolve(seen);
      const gone = closed.then(() => logs.find(match) ?? Promise.reject(new Error(`the worker exited without a matching log line; ${lastLines()}`)));
      return within(Promise.race([new Promise<LogLine>((resolve) => waiters.push({ match, resolve })), gone]), 60_000, () => `a matching worker log line; ${lastLines()}`);
    },
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      return exited;
    },
    stderr: () => stderr,
  };
}
