// POST …/check-repository: can kiln reach the repository? `git ls-remote` answers that without
// cloning. Never interactive (no terminal prompt, ssh in batch mode), bounded in time, and the URL
// always comes after `--` so it can never be read as an option. A failure is only "unreachable":
// git's own text (connection refused, no route, wrong protocol) would turn the check into a port
// scanner of whatever network the server sits in.
import { execFile } from 'node:child_process';
import { gitConfigArgs, gitEnvironment } from './repositoryPolicy.js';

export type RepositoryCheck =
  | { ok: true; refs: { name: string; commit: string }[]; truncated: boolean }
  | { ok: false; reason: string };

const MAX_REFS = 200;
export const REPOSITORY_CHECK_TIMEOUT_MS = 20_000;

/** What a failed check answers, whatever git said. */
export const UNREACHABLE = 'unreachable';

/** `gitOptions`: vetRepository's `-c` options for this URL. */
export function checkRepository(repository: string, gitOptions: readonly string[], timeoutMs = REPOSITORY_CHECK_TIMEOUT_MS): Promise<RepositoryCheck> {
  return new Promise((resolve) => {
    execFile(
      'git',
      ['-c', 'protocol.ext.allow=never', ...gitConfigArgs(gitOptions, ['-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=accept-new']), 'ls-remote', '--heads', '--tags', '--', repository],
      {
        timeout: timeoutMs,
        killSignal: 'SIGKILL',
        maxBuffer: 16 << 20,
        env: gitEnvironment(),
      },
      (error, stdout) => {
        if (error) {
          resolve({ ok: false, reason: UNREACHABLE });
          return;
        }
        const refs = stdout
          .split('\n')
          .filter(Boolean)
          .map((line) => {
            const [commit = '', name = ''] = line.split('\t');
            return { name, commit };
          });
        resolve({ ok: true, refs: refs.slice(0, MAX_REFS), truncated: refs.length > MAX_REFS });
      },
    );
  });
}
