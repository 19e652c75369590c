// Fetching a project's repository at one commit into <baseDir>/repos/<project>, for Nix to
// evaluate as `git+file://<clone>?ref=kiln/<commit>&rev=<commit>`. The clone is bare and kept
// between jobs, so the next evaluation fetches only new objects. Nix 2.8 fetches a `rev` through a
// ref, so each commit gets its own ref (refs/heads/kiln/<commit>).
// One clone per project, never per URL: a directory derived from the URL let any tenant name
// another tenant's clone (or reuse its objects) by giving the same URL. Clones are owner-only
// (0700 directories, git's files 0600 through core.sharedRepository), so no other local account
// reads a tenant's history.
// A private repository of a Git host application comes with an installation token: it reaches git
// through the fetch's environment alone (protocol's gitAccessEnv), with git pinned to the addresses
// the server checked.
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { gitAccessEnv, jobFailure, type JobFailure, type RepositoryAccess } from '../protocol/index.js';
import { runCommand, type RunOptions } from './childProcess.js';
import { ensurePrivateDirectory } from './privateDirectories.js';

export type Checkout = { ok: true; flakeRef: string; clone: string } | { ok: false; failure: JobFailure };

/** One fetch per clone at a time; evaluations of other repositories go on in parallel. */
const locks = new Map<string, Promise<unknown>>();

async function withLock<T>(key: string, run: () => Promise<T>): Promise<T> {
  const previous = locks.get(key) ?? Promise.resolve();
  const next = previous.catch(() => undefined).then(run);
  locks.set(key, next);
  try {
    return await next;
  } finally {
    if (locks.get(key) === next) locks.delete(key);
  }
}

/**
 * git under umask 077: core.sharedRepository covers objects and refs but not every file git
 * writes (FETCH_HEAD), and an in-process worker does not have `kiln worker`'s umask.
 */
const privateGit = (args: readonly string[], options: RunOptions) => runCommand('/bin/sh', ['-c', 'umask 077 && exec git "$@"', 'git', ...args], options);

/**
 * Every fetch: no redirects (the server vetted the URL the project names, not wherever it redirects
 * to, say an internal address; its own git commands refuse redirects too) and no ext:: transport.
 */
const FETCH_CONFIG = ['-c', 'http.followRedirects=false', '-c', 'protocol.ext.allow=never'];

const exists = (path: string) => stat(path).then(() => true, () => false);

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The clone of one project; the project id is a UUID (checked again: it becomes a path). */
export function cloneDirectory(baseDir: string, project: string): string {
  const id = project.toLowerCase();
  if (!UUID.test(id)) throw new Error(`project id ${JSON.stringify(project.slice(0, 60))} is not a UUID`);
  return join(baseDir, 'repos', id);
}

export function checkoutCommit(
  baseDir: string, project: string, repository: string, commit: string, env: NodeJS.ProcessEnv, signal?: AbortSignal, access?: RepositoryAccess,
): Promise<Checkout> {
  const clone = cloneDirectory(baseDir, project);
  const git = (args: string[]) => privateGit(['-C', clone, ...args], { env, ...(signal ? { signal } : {}) });
  const fetchEnv = access ? gitAccessEnv(env, access) : env;
  const fetch = (args: string[]) => privateGit(['-C', clone, ...FETCH_CONFIG, 'fetch', ...args], { env: fetchEnv, ...(signal ? { signal } : {}) });
  const hasCommit = async () => (await git(['cat-file', '-e', `${commit}^{commit}`])).exitCode === 0;
  return withLock(clone, async (): Promise<Checkout> => {
    await ensurePrivateDirectory(clone);
    if (!(await exists(join(clone, 'HEAD')))) {
      const init = await privateGit(['init', '--quiet', '--bare', '--shared=0600', clone], { env });
      if (init.exitCode !== 0) return { ok: false, failure: jobFailure('worker_error', `git init ${clone} failed: ${init.stderr.trim()}`) };
    }
    if (!(await hasCommit())) {
      // Most servers hand out any commit by its hash; fall back to all branches and tags for those that do not.
      const byHash = await fetch(['--quiet', '--no-tags', repository, commit]);
      if (byHash.aborted) return { ok: false, failure: jobFailure('cancelled', 'the fetch was cancelled') };
      if (byHash.exitCode !== 0 || !(await hasCommit())) {
        const all = await fetch(['--quiet', '--force', repository, '+refs/heads/*:refs/remotes/origin/*', '+refs/tags/*:refs/tags/*']);
        if (all.aborted) return { ok: false, failure: jobFailure('cancelled', 'the fetch was cancelled') };
        if (all.exitCode !== 0) return { ok: false, failure: jobFailure('fetch_failed', `git fetch ${repository} failed: ${all.stderr.trim() || byHash.stderr.trim()}`) };
        if (!(await hasCommit())) return { ok: false, failure: jobFailure('commit_not_found', `commit ${commit} is not in ${repository}`) };
      }
    }
    const ref = await git(['update-ref', `refs/heads/kiln/${commit}`, commit]);
    if (ref.exitCode !== 0) return { ok: false, failure: jobFailure('worker_error', `git update-ref failed: ${ref.stderr.trim()}`) };
    return { ok: true, clone, flakeRef: `git+${pathToFileURL(clone).href}?ref=kiln/${commit}&rev=${commit}` };
  });
}
