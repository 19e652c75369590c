// The commit at the head of a branch (or of HEAD when no branch is set), asked with
// `git ls-remote` as the repository check does: never interactive, bounded in time, URL after `--`,
// and without git's text when it fails (see repositoryCheck.ts).
import { execFile } from 'node:child_process';
import { ApiError } from '../../protocol/index.js';
import { REPOSITORY_CHECK_TIMEOUT_MS } from './repositoryCheck.js';
import { gitConfigArgs } from './repositoryPolicy.js';

/** `gitOptions`: vetRepository's `-c` options for this URL. */
export function resolveHead(repository: string, branch: string | null, gitOptions: readonly string[]): Promise<string> {
  const ref = branch ? `refs/heads/${branch}` : 'HEAD';
  return new Promise((resolve, reject) => {
    execFile(
      'git', ['-c', 'protocol.ext.allow=never', ...gitConfigArgs(gitOptions), 'ls-remote', '--', repository, ref],
      { timeout: REPOSITORY_CHECK_TIMEOUT_MS, killSignal: 'SIGKILL', env: { ...process.env, GIT_TERMINAL_PROMPT: '0', GIT_ASKPASS: '/bin/false', GIT_SSH_COMMAND: 'ssh -o BatchMode=yes' } },
      (error, stdout) => {
        const commit = stdout.split('\n').map((l) => l.split('\t')).find((parts) => parts[1] === ref)?.[0];
        if (!error && commit && /^([0-9a-f]{40}|[0-9a-f]{64})$/.test(commit)) return resolve(commit);
        const detail = error ? 'the repository is unreachable' : `no ${ref} in the repository`;
        reject(new ApiError('repository_unavailable', `cannot find the head of ${branch ? `branch "${branch}"` : 'the default branch'}: ${detail}`));
      },
    );
  });
}
