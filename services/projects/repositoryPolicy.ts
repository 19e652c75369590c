// Which repository URLs a tenant may give a project. A local path or file:// URL would let a
// tenant read any repository on the server's or a worker's disk (other tenants' clones among
// them), and a loopback or private address would let it probe the internal network through git.
// Both are refused unless the instance sets projects.allowLocalRepositories. Names are resolved
// here, and git is then held to what was checked: only the checked transports, no redirects,
// and http(s) pinned to the addresses checked (no second DNS answer).
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
  const options = ['protocol.allow=never', ...PERMITTED_PROTOCOLS.map((p) => `protocol.${p}.allow=always`), 'http.followRedirects=false'];
  const port = target.port ?? DEFAULT_PORTS[scheme];
  if (literal === undefined && port !== undefined && addresses.length > 0) {
    options.push(`http.curloptResolve=${host}:${port}:${addresses.map((a) => (a.includes(':') ? `[${a}]` : a)).join(',')}`);
  }
  return options;
}

/** `git -c a -c b …` from vetRepository's options. */
export const gitConfigArgs = (options: readonly string[]): string[] => options.flatMap((o) => ['-c', o]);
