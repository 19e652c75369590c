// Which repository URLs a tenant may give a project. A local path or file:// URL would let a
// tenant read any repository on the server's or a worker's disk (other tenants' clones among
// them), and a loopback or private address would let it probe the internal network through git.
// Both are refused unless the instance sets projects.allowLocalRepositories. Names are resolved
// here, and git is then held to what was checked: only the checked transports, no redirects,
// and pinned to the addresses checked (no second DNS answer): http(s) and ftp(s) with curl's
// resolve list, ssh by connecting to a checked address while host keys are still looked up by
// name. git:// has no way to pin (git resolves and connects itself), so a git:// URL naming a host
// by name is refused; a git:// address literal is its own pin.
import { lookup as dnsLookup } from 'node:dns/promises';
import { ApiError } from '../../protocol/index.js';
import { isLocalHostName, isPrivateAddress, repositoryTarget } from './repositoryAddress.js';

/** The addresses a host name resolves to; [] when it does not resolve. */
export type HostLookup = (host: string) => Promise<string[]>;

export const systemHostLookup: HostLookup = async (host) => {
  try {
    return (await dnsLookup(host, { all: true, verbatim: true })).map((a) => a.address);
  } catch {
    return [];
  }
};

export const ALLOW_LOCAL_OPTION = 'projects.allowLocalRepositories';

export interface RepositoryPolicy {
  allowLocal: boolean;
  lookup?: HostLookup;
}

const DEFAULT_PORTS: Record<string, number> = { http: 80, https: 443, ftp: 21, ftps: 990 };
const PERMITTED_PROTOCOLS = ['http', 'https', 'ftp', 'ftps', 'ssh', 'git'];

const refused = (repository: string, what: string) =>
  new ApiError('repository_not_allowed', `repository "${repository.slice(0, 200)}" ${what}; local and private-network repositories need the instance option ${ALLOW_LOCAL_OPTION}`);

/**
 * Checks a repository URL against the policy; throws ApiError 422 `repository_not_allowed`.
 * Returns the `-c` options every git command on this URL must run with.
 */
export async function vetRepository(repository: string, policy: RepositoryPolicy): Promise<string[]> {
  const target = repositoryTarget(repository);
  if (target.kind === 'unsupported') throw new ApiError('repository_not_allowed', `repository "${repository.slice(0, 200)}": ${target.reason}`);
  if (policy.allowLocal) return [];
  if (target.kind === 'local') throw refused(repository, 'is a local path');
  const { host, scheme } = target;
  if (isLocalHostName(host)) throw refused(repository, `names this machine (${host})`);
  const literal = isPrivateAddress(host);
  if (literal === true) throw refused(repository, `points at a loopback, private or reserved address (${host})`);
  const addresses = literal === false ? [host] : await (policy.lookup ?? systemHostLookup)(host);
  const privateOne = addresses.find((a) => isPrivateAddress(a) !== false);
  if (privateOne !== undefined) throw refused(repository, `names a host that resolves to a loopback, private or reserved address (${host} is ${privateOne})`);
  if (literal === undefined && scheme === 'git' && addresses.length > 0) {
    throw new ApiError('repository_not_allowed', `repository "${repository.slice(0, 200)}": git:// cannot be held to the address kiln checks (git resolves ${host} again itself); use https:// or ssh://, or the host's address`);
  }
  const options = ['protocol.allow=never', ...PERMITTED_PROTOCOLS.map((p) => `protocol.${p}.allow=always`), 'http.followRedirects=false'];
  const port = target.port ?? DEFAULT_PORTS[scheme];
  if (literal === undefined && port !== undefined && addresses.length > 0) {
    options.push(`http.curloptResolve=${host}:${port}:${addresses.map((a) => (a.includes(':') ? `[${a}]` : a)).join(',')}`);
  }
  if (literal === undefined && SSH_SCHEMES.has(scheme) && addresses.length > 0) {
    // ssh connects to one address: the first checked one. HostKeyAlias keeps known_hosts keyed by the name.
    options.push(`${SSH_PIN_KEY}=-o HostName=${addresses[0]!} -o HostKeyAlias=${host}`);
  }
  return options;
}

const SSH_SCHEMES = new Set(['ssh', 'git+ssh', 'ssh+git']);
/** Not a git setting: carries the ssh pin from vetRepository to gitConfigArgs, which puts it into core.sshCommand. */
const SSH_PIN_KEY = 'kiln.sshPin';

/**
 * `git -c a -c b …` from vetRepository's options, with ssh run as `ssh <sshOptions> <the pin>`
 * (core.sshCommand; the caller's environment must not set GIT_SSH_COMMAND or GIT_SSH, which would
 * win: gitEnvironment drops them).
 */
export function gitConfigArgs(options: readonly string[], sshOptions: readonly string[] = ['-o', 'BatchMode=yes']): string[] {
  const pin = options.find((o) => o.startsWith(`${SSH_PIN_KEY}=`))?.slice(SSH_PIN_KEY.length + 1);
  const ssh = ['ssh', ...sshOptions, ...(pin !== undefined ? [pin] : [])].join(' ');
  return [...options.filter((o) => !o.startsWith(`${SSH_PIN_KEY}=`)), `core.sshCommand=${ssh}`].flatMap((o) => ['-c', o]);
}

/** The server's environment for git: never a prompt, and no GIT_SSH_COMMAND / GIT_SSH that would replace core.sshCommand (the pin). */
export function gitEnvironment(): NodeJS.ProcessEnv {
  const { GIT_SSH_COMMAND: _command, GIT_SSH: _ssh, ...env } = process.env;
  return { ...env, GIT_TERMINAL_PROMPT: '0', GIT_ASKPASS: '/bin/false', SSH_ASKPASS: '/bin/false' };
}
