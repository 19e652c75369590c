// The `kiln` client as users run it, from tests: a child process (asynchronous, since the server
// answering it usually lives in the test's own process), its output and its JSON parsed; and the
// same inside a pseudo-terminal (util-linux `script`) for what the client draws only on terminals.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Test } from 'tap';
import { within } from './eventually.js';
import type { TestKiln } from './kiln.js';

const bin = fileURLToPath(new URL('../../bin/kiln.js', import.meta.url));

export interface CliRun {
  status: number;
  stdout: string;
  stderr: string;
  json: unknown;
}

const baseEnv = (env: Record<string, string>) => ({ PATH: process.env['PATH'] ?? '', NIX_REMOTE: 'local', ...env });

function collect(child: ChildProcessWithoutNullStreams): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      let json: unknown = null;
      try {
        json = JSON.parse(stdout);
      } catch {
        // not JSON output
      }
      resolve({ status: code ?? -1, stdout, stderr, json });
    });
  });
}

/** `kiln args…` with only PATH, NIX_REMOTE and `env` in its environment; `input` is its whole stdin. */
export function kilnCli(args: string[], env: Record<string, string>, input = ''): Promise<CliRun> {
  const child = spawn(process.execPath, [bin, ...args], { env: baseEnv(env), stdio: ['pipe', 'pipe', 'pipe'] });
  const run = collect(child);
  child.stdin.end(input);
  return run;
}

/** A `kiln` started and not yet finished: its output so far, and what it ends with. */
export interface CliSession {
  /** stdout so far (in a terminal: everything the terminal showed) */
  output(): string;
  /** resolves with the output once it satisfies `match` (fails after a minute, showing it) */
  waitFor(match: RegExp): Promise<string>;
  write(text: string): void;
  readonly done: Promise<CliRun>;
}

const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * `kiln args…` started; with `terminal`, inside `script` so that its stdin, stdout and stderr are
 * one pseudo-terminal of 120 × 40 (what it shows is then all in output()).
 */
export function startKilnCli(args: string[], env: Record<string, string>, opts: { terminal?: boolean } = {}): CliSession {
  const command = [process.execPath, bin, ...args].map(shellQuote).join(' ');
  const child = opts.terminal
    ? spawn('script', ['-q', '-e', '-c', `stty cols 120 rows 40; exec ${command}`, '/dev/null'], { env: baseEnv({ TERM: 'xterm', ...env }), stdio: ['pipe', 'pipe', 'pipe'] })
    : spawn(process.execPath, [bin, ...args], { env: baseEnv(env), stdio: ['pipe', 'pipe', 'pipe'] });
  let seen = '';
  let closed = false;
  let wake: (() => void)[] = [];
  const notify = () => {
    const woken = wake;
    wake = [];
    for (const w of woken) w();
  };
  child.stdout.on('data', (d: Buffer) => {
    seen += d.toString();
    notify();
  });
  child.on('close', () => {
    closed = true;
    notify();
  });
  const done = collect(child);
  const waitFor = async (match: RegExp): Promise<string> => {
    while (!match.test(seen)) {
      if (closed) throw new Error(`kiln ${args.join(' ')} ended before its output matched ${match}:\n${seen}`);
      await new Promise<void>((resolve) => wake.push(resolve));
    }
    return seen;
  };
  return {
    output: () => seen,
    waitFor: (match) => within(waitFor(match), 60_000, () => `kiln ${args.join(' ')}: no output matching ${match}:\n${seen}`),
    write: (text) => child.stdin.write(text),
    done,
  };
}

/**
 * What the CLI's end-to-end tests start from: user ada's CLI environment (HOME in `work`), a cache
 * `main`, and project acme/app on `repository` writing into it, made with the CLI itself.
 */
export async function cliProject(t: Pick<Test, 'equal'>, kiln: Pick<TestKiln, 'url' | 'api'>, token: string, work: string, repository: string): Promise<Record<string, string>> {
  const env = { HOME: work, KILN_SERVER: kiln.url, KILN_TOKEN: token };
  await kiln.api('PUT', '/caches', { token, body: { name: 'main' } });
  t.equal((await kilnCli(['org', 'create', 'acme'], env)).status, 0);
  const project = await kilnCli(['project', 'create', 'acme/app', '--repository', repository, '--wildcard', 'packages.x86_64-linux.*', '--cache', 'main'], env);
  t.equal(project.status, 0, project.stderr);
  return env;
}
