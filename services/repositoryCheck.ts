import { execFile } from 'node:child_process';

// POST …/check-repository: can kiln reach the repository? `git ls-remote` answers that without
// cloning. Never interactive (no terminal prompt, ssh in batch mode), bounded in time, and the URL
// always comes after `--` so it can never be read as an option.

export type RepositoryCheck =
  | { ok: true; refs: { name: string; commit: string }[]; truncated: boolean }
  | { ok: false; reason: string };

const MAX_REFS = 200;
export const REPOSITORY_CHECK_TIMEOUT_MS = 20_000;

export function checkRepository(repository: string, timeoutMs = REPOSITORY_CHECK_TIMEOUT_MS): Promise<RepositoryCheck> {
  return new Promise((resolve) => {
    execFile(
      'git',
      ['-c', 'protocol.ext.allow=never', 'ls-remote', '--heads', '--tags', '--', repository],
      {
        timeout: timeoutMs,
        killSignal: 'SIGKILL',
        maxBuffer: 16 << 20,
        env: {
          ...process.env,
          GIT_TERMINAL_PROMPT: '0',
          GIT_ASKPASS: '/bin/false',
          SSH_ASKPASS: '/bin/false',
          GIT_SSH_COMMAND: 'ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new',
        },
      },
      (error, stdout, stderr) => {
        if (error) {
          const timedOut = (error as { killed?: boolean }).killed === true;
          const detail = stderr.trim().split('\n').filter(Boolean).slice(0, 5).join('; ').slice(0, 1000);
          resolve({
            ok: false,
            reason: timedOut ? `git ls-remote did not answer within ${Math.round(timeoutMs / 1000)} s` : detail || `git ls-remote failed (${error.message})`,
          });
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
