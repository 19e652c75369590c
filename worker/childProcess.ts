// Running git and Nix: arguments as an array (never a shell), the worker's child environment,
// stdout collected, stderr handed over line by line and its tail kept for error messages, and
// an AbortSignal that ends the child and everything it started (SIGTERM to its process group, then
// SIGKILL): nix-store forks substituters and helpers, and a cancelled build must leave nothing behind.
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import type { Readable } from 'node:stream';
import { closeSync, openSync } from 'node:fs';
import { withOomScore } from './oomScore.js';

export interface RunOptions {
  env: NodeJS.ProcessEnv;
  cwd?: string;
  signal?: AbortSignal;
  /** each stderr line as it arrives (without the newline) */
  onStderrLine?: (line: string) => void;
  /** bytes of stderr kept for the result (the tail); default 64 KiB */
  stderrTailBytes?: number;
  /** stdout is collected unless this is false */
  collectStdout?: boolean;
  /** the child's out-of-memory score adjustment (worker/oomScore.ts); unset: inherited */
  oomScore?: number;
  /** a file the child reads as its standard input (nix-store --restore); none: /dev/null */
  stdinFile?: string;
  /** the child's pid once it runs; it leads its own process group */
  onStart?: (pid: number) => void;
}

export interface RunResult {
  /** null when the child was ended by a signal */
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** the AbortSignal fired while the child ran */
  aborted: boolean;
}

const KILL_GRACE_MS = 5000;

export function runCommand(command: string, args: readonly string[], options: RunOptions): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    if (options.signal?.aborted) {
      resolve({ exitCode: null, signal: null, stdout: '', stderr: '', aborted: true });
      return;
    }
    // detached: the child leads its own process group, which the abort signals as a whole.
    const [file, argv] = options.oomScore === undefined ? [command, args] : withOomScore(options.oomScore, command, args);
    let stdin: number | 'ignore' = 'ignore';
    try {
      if (options.stdinFile !== undefined) stdin = openSync(options.stdinFile, 'r');
    } catch (error) {
      reject(error instanceof Error ? error : new Error(String(error)));
      return;
    }
    // (a descriptor is not among the typings' stdio tuples; stdout and stderr are pipes either way)
    const child = spawn(file, argv, { env: options.env, cwd: options.cwd, stdio: [stdin, 'pipe', 'pipe'], detached: true }) as ChildProcessByStdio<null, Readable, Readable>;
    // the child has its own copy of the descriptor now
    if (typeof stdin === 'number') closeSync(stdin);
    if (child.pid !== undefined) options.onStart?.(child.pid);
    const stdout: Buffer[] = [];
    const tailLimit = options.stderrTailBytes ?? 64 * 1024;
    let tail = '';
    let partial = '';
    let aborted = false;
    let killTimer: NodeJS.Timeout | undefined;
    const signalGroup = (signal: NodeJS.Signals) => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, signal);
      } catch {
        child.kill(signal); // the group is gone already, or the child never started one
      }
    };
    const onAbort = () => {
      aborted = true;
      // SIGTERM first: Nix then stops its builder (its own session) and cleans up; SIGKILL if it does not.
      signalGroup('SIGTERM');
      killTimer = setTimeout(() => signalGroup('SIGKILL'), KILL_GRACE_MS);
    };
    options.signal?.addEventListener('abort', onAbort, { once: true });
    if (options.collectStdout !== false) child.stdout.on('data', (chunk: Buffer) => stdout.push(chunk));
    else child.stdout.resume();
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (text: string) => {
      tail = (tail + text).slice(-tailLimit);
      if (!options.onStderrLine) return;
      const lines = (partial + text).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) options.onStderrLine(line);
    });
    child.on('error', (error) => {
      options.signal?.removeEventListener('abort', onAbort);
      reject(new Error(`cannot run ${command}: ${error.message}`, { cause: error }));
    });
    child.on('close', (exitCode, signal) => {
      options.signal?.removeEventListener('abort', onAbort);
      if (killTimer) clearTimeout(killTimer);
      if (partial && options.onStderrLine) options.onStderrLine(partial);
      resolve({ exitCode, signal, stdout: Buffer.concat(stdout).toString('utf8'), stderr: tail, aborted });
    });
  });
}

/** Nix's messages carry ANSI colours even when not on a terminal (internal-json). */
export const stripAnsi = (text: string): string => text.replace(/\u001b\[[0-9;]*[A-Za-z]/g, '');
