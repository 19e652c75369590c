// The commit at the head of a branch (or of HEAD when no branch is set), asked with
// `git ls-remote` as the repository check does: never interactive, bounded in time, URL after `--`,
// and without git's text when it fails (see repositoryCheck.ts).
import { execFile } from 'node:child_process';
import { ApiError, gitAccessEnv, type RepositoryAccess } from '../../protocol/index.js';
import { REPOSITORY_CHECK_TIMEOUT_MS } from './repositoryCheck.js';
import { gitConfigArgs, gitEnvironment } from './repositoryPolicy.js';

/** `gitOptions`: vetRepository's `-c` options for this URL. */
export function resolveHead(repository: string, branch: string | null, gitOptions: readonly string[]): Promise<string> {
  const ref = branch ? `refs/heads/${branch}` : 'HEAD';
  return new Promise((resolve, reject) => {
    execFile(
      'git', ['-c', 'protocol.ext.allow=never', ...gitConfigArgs(gitOptions), 'ls-remote', '--', repository, ref],
      { timeout: REPOSITORY_CHECK_TIMEOUT_MS, killSignal: 'SIGKILL', env: gitEnvironment() },
      (error, stdout) => {
        const commit = stdout.split('\n').map((l) => l.split('\t')).find((parts) => parts[1] === ref)?.[0];
        if (!error && commit && /^([0-9a-f]{40}|[0-9a-f]{64})$/.test(commit)) return resolve(commit);
        const detail = error ? 'the repository is unreachable' : `no ${ref} in the repository`;
        reject(new ApiError('repository_unavailable', `cannot find the head of ${branch ? `branch "${branch}"` : 'the default branch'}: ${detail}`));
      },
    );
  });
}

/** The branch heads of a repository and the branch its HEAD names (null when it names none). */
export interface RepositoryHeads {
  branches: Map<string, string>;
  head: string | null;
}

/**
 * Every branch head at once (`git ls-remote --symref … HEAD refs/heads/*`), for polling. `access`:
 * a private repository's installation token, which reaches git through its environment only.
 */
export function listHeads(repository: string, gitOptions: readonly string[], access?: RepositoryAccess): Promise<RepositoryHeads> {
  const env = gitEnvironment();
  return new Promise((resolve, reject) => {
    execFile(
      'git', ['-c', 'protocol.ext.allow=never', ...gitConfigArgs(gitOptions), 'ls-remote', '--symref', '--', repository, 'HEAD', 'refs/heads/*'],
      { timeout: REPOSITORY_CHECK_TIMEOUT_MS, killSignal: 'SIGKILL', maxBuffer: 16 * 1024 * 1024, env: access ? gitAccessEnv(env, access) : env },
      (error, stdout) => {
        if (error) return reject(new ApiError('repository_unavailable', 'cannot list the branches: the repository is unreachable'));
        const branches = new Map<string, string>();
        let head: string | null = null;
        for (const line of stdout.split('\n')) {
          const symref = /^ref: refs\/heads\/(\S+)\tHEAD$/.exec(line);
          if (symref) {
            head = symref[1]!;
            continue;
          }
          const [commit, ref] = line.split('\t');
          if (commit && ref?.startsWith('refs/heads/') && /^([0-9a-f]{40}|[0-9a-f]{64})$/.test(commit)) branches.set(ref.slice('refs/heads/'.length), commit);
        }
        resolve({ branches, head });
      },
    );
  });
}
