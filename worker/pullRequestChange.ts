// The worker's half of the open_pr task action (docs/git-hosts.md, "open_pr"): in a scratch clone
// of the project's clone at the evaluated commit, run the configured command (e.g. `nix flake
// update`, which fetches URLs the tenant chooses: why this runs on a worker, never on the server),
// commit whatever it changed as the configured author and push it to the pull request's branch with
// a write-scoped installation token. The token reaches git through the push's environment only
// (protocol's gitAccessEnv): never the command line, the URL, a file or the command's environment.
// The command runs without it. The scratch clone is removed whatever happens.
import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { gitAccessEnv, jobFailure, type JobFailure, type RepositoryAccess } from '../protocol/index.js';
import { runCommand, type RunOptions } from './childProcess.js';

export interface ChangeRequest {
  /** the project's clone (gitCheckout.ts), which holds `commit` */
  clone: string;
  commit: string;
  /** the argv that produces the change, run in the scratch work tree */
  command: readonly string[];
  /** where to push (the host's clone URL of the repository) and with what: a token that may write contents */
  repository: string;
  access: RepositoryAccess;
  /** the branch the pull request is opened from (refs/heads/<branch>), force-pushed */
  branch: string;
  /** pullRequests.commitName / commitEmail; null: the worker's own git identity (user.name, user.email) */
  author: { name: string | null; email: string | null };
  message: string;
  /** the worker's child environment */
  env: NodeJS.ProcessEnv;
  /** where scratch clones are made */
  scratchDir: string;
  signal?: AbortSignal;
}

/** pushed: the commit now at the branch; null when the command changed nothing (nothing pushed). */
export type ChangeOutcome = { ok: true; pushed: string | null } | { ok: false; failure: JobFailure };

/** As every fetch: no redirects, no ext:: transport. */
const PUSH_CONFIG = ['-c', 'http.followRedirects=false', '-c', 'protocol.ext.allow=never'];

const tail = (text: string) => text.trim().split('\n').slice(-20).join('\n');

export async function pushChange(request: ChangeRequest): Promise<ChangeOutcome> {
  const scratch = await mkdtemp(join(request.scratchDir, 'open-pr-'));
  const options = (env: NodeJS.ProcessEnv, cwd?: string): RunOptions => ({ env, ...(cwd ? { cwd } : {}), ...(request.signal ? { signal: request.signal } : {}) });
  const git = (args: readonly string[], env = request.env) => runCommand('git', ['-C', scratch, ...args], options(env));
  const failed = (what: string, stderr: string): ChangeOutcome => ({ ok: false, failure: jobFailure('worker_error', `${what}: ${tail(stderr)}`.slice(0, 4000)) });
  try {
    const cloned = await runCommand('git', ['clone', '--quiet', '--no-checkout', '--', request.clone, scratch], options(request.env));
    if (cloned.exitCode !== 0) return failed('git clone of the project\'s clone failed', cloned.stderr);
    const checkout = await git(['checkout', '--quiet', '--detach', request.commit]);
    if (checkout.exitCode !== 0) return failed(`git checkout ${request.commit} failed`, checkout.stderr);

    const [program, ...args] = request.command;
    const ran = await runCommand(program!, args, options(request.env, scratch));
    if (ran.aborted) return { ok: false, failure: jobFailure('cancelled', 'the command was cancelled') };
    if (ran.exitCode !== 0) return { ok: false, failure: jobFailure('worker_error', `the command ${JSON.stringify(request.command.join(' ').slice(0, 200))} failed (exit ${ran.exitCode ?? ran.signal}): ${tail(ran.stderr)}`.slice(0, 4000)) };

    const added = await git(['add', '--all']);
    if (added.exitCode !== 0) return failed('git add failed', added.stderr);
    const unchanged = await git(['diff', '--cached', '--quiet']);
    if (unchanged.exitCode === 0) return { ok: true, pushed: null };

    const { name, email } = request.author;
    const authorEnv = {
      ...request.env,
      ...(name !== null ? { GIT_AUTHOR_NAME: name, GIT_COMMITTER_NAME: name } : {}),
      ...(email !== null ? { GIT_AUTHOR_EMAIL: email, GIT_COMMITTER_EMAIL: email } : {}),
    };
    const committed = await git(['-c', 'commit.gpgSign=false', 'commit', '--quiet', '--no-verify', '-m', request.message], authorEnv);
    if (committed.exitCode !== 0) return failed('git commit failed', committed.stderr);
    const head = (await git(['rev-parse', 'HEAD'])).stdout.trim();

    const pushed = await git([...PUSH_CONFIG, 'push', '--quiet', '--force', '--no-verify', '--', request.repository, `HEAD:refs/heads/${request.branch}`], gitAccessEnv(request.env, request.access));
    if (pushed.aborted) return { ok: false, failure: jobFailure('cancelled', 'the push was cancelled') };
    if (pushed.exitCode !== 0) return { ok: false, failure: jobFailure('fetch_failed', `git push to ${request.repository} failed: ${tail(pushed.stderr)}`.slice(0, 4000)) };
    return { ok: true, pushed: head };
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}
