// How a Git host installation token reaches git (docs/git-hosts.md, "Private repositories"): as an
// http.extraHeader (HTTP Basic `x-access-token:<token>`, as GitHub's git service takes installation
// tokens) through GIT_CONFIG_* variables of that one git process. Never the command line (other
// local accounts can read it), never the URL (git repeats URLs in messages and FETCH_HEAD), never
// a file; no credential helper may store or answer for it, no prompt; git pinned to the addresses
// checked (http.curloptResolve). Used by the worker's fetch and push and by the server's polling.
import type { RepositoryAccess } from './jobMessages.js';

/**
 * git configuration through the environment (GIT_CONFIG_COUNT, GIT_CONFIG_KEY_<n>, GIT_CONFIG_VALUE_<n>),
 * added to whatever the environment already sets that way.
 */
export function withGitConfig(env: NodeJS.ProcessEnv, entries: readonly (readonly [string, string])[]): NodeJS.ProcessEnv {
  const first = Number(env['GIT_CONFIG_COUNT'] ?? 0) || 0;
  const added: NodeJS.ProcessEnv = { GIT_CONFIG_COUNT: String(first + entries.length) };
  entries.forEach(([key, value], i) => {
    added[`GIT_CONFIG_KEY_${first + i}`] = key;
    added[`GIT_CONFIG_VALUE_${first + i}`] = value;
  });
  return { ...env, ...added };
}

/** `env` for a git process that talks to the host with `access`'s token. */
export function gitAccessEnv(env: NodeJS.ProcessEnv, access: RepositoryAccess): NodeJS.ProcessEnv {
  const basic = Buffer.from(`x-access-token:${access.token}`).toString('base64');
  return {
    ...withGitConfig(env, [
      ['http.extraHeader', `Authorization: Basic ${basic}`],
      ['credential.helper', ''],
      ...(access.resolve !== null ? [['http.curloptResolve', access.resolve] as const] : []),
    ]),
    GIT_TERMINAL_PROMPT: '0',
    GIT_ASKPASS: '/bin/false',
  };
}
