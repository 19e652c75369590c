// Private repositories through the Git host application (docs/git-hosts.md, "Private
// repositories"): an evaluation of a project linked to the installation that covers its
// repository is fetched from gitHostApp.cloneUrl with an installation token, which the worker gets
// in the job and nowhere else (never a row, never a log line).
// The link: the project's repository URL names a repository of an installation (installation and
// installation_repositories events), and that repository's default branch holds the file
// .kiln-projects naming the project (`org/project` on a line of its own). Naming the URL alone is
// not enough: any tenant can name any URL, and the application may be installed on private
// repositories of other tenants. Only who can write to the repository's default branch can name a
// project in it (a fork's pull request cannot: the file is read from the default branch). The file
// is read again after `recheckMs`, so removing the line revokes the link.
// The token is scoped to the one repository, contents read-only, and goes only to the addresses
// the clone URL resolves to that outbound.allowedNetworks allows, pinned for git (no second DNS answer).
import { lookup as dnsLookup } from 'node:dns/promises';
import type { Logger } from 'pino';
import type { Sql } from 'postgres';
import { urlHost, type RepositoryAccess } from '../../protocol/index.js';
import type { OutboundClient } from '../../storage/index.js';
import type { Clock } from '../../supervisors/index.js';
import { HostApiError, type HostApi } from './hostApi.js';
import { repositoryKey } from './repositoryMatch.js';

/** The file on the default branch that names the projects a repository lets kiln fetch it for. */
const LINK_FILE = '.kiln-projects';
/** The file is read at most this much (GitHub's contents API serves files up to 1 MB inline). */
const LINK_FILE_MAX_BYTES = 64 * 1024;
const DEFAULT_RECHECK_MS = 10 * 60_000;

export interface RepositoryAccessDeps {
  sql: Sql;
  api: HostApi;
  outbound: Pick<OutboundClient, 'policy'>;
  /** gitHostApp.cloneUrl, or what it defaults to (cloneBaseUrl) */
  cloneUrl: string;
  clock: Clock;
  log: Logger;
  /** how long a reading of the link file holds (default 10 minutes) */
  recheckMs?: number;
  /** a name's addresses (default: the system resolver); tests stand in their own */
  resolve?: (name: string) => Promise<string[]>;
}

/** What an evaluation job of a linked project carries: where to fetch and with what. */
export interface PrivateFetch {
  /** <cloneUrl>/<owner>/<name>.git */
  repository: string;
  access: RepositoryAccess;
  /** the installation and repository the token is for (the open_pr action asks a write token for the same) */
  installationId: number;
  repositoryId: number;
  /** owner/name */
  fullName: string;
}

/** gitHostApp.cloneUrl's default: github.com for api.github.com, else the API URL without /api/v3 (GitHub Enterprise) or /api/v1 (Gitea, Forgejo). */
export function cloneBaseUrl(apiUrl: string, cloneUrl: string | null): string {
  if (cloneUrl !== null) return cloneUrl.replace(/\/+$/, '');
  const api = new URL(apiUrl);
  if (api.hostname === 'api.github.com') return 'https://github.com';
  return `${api.origin}${api.pathname.replace(/\/+$/, '').replace(/\/api\/v[13]$/, '')}`;
}

/** The repository's owner/name (lower case) when `repository` is one under `cloneUrl`, else null. */
export function hostedFullName(repository: string, cloneUrl: string): string | null {
  const key = repositoryKey(repository);
  const base = new URL(cloneUrl);
  const prefix = `${base.hostname.toLowerCase()}${decodeURIComponent(base.pathname).replace(/\/+$/, '').toLowerCase()}/`;
  if (key === null || !key.startsWith(prefix)) return null;
  const fullName = key.slice(prefix.length);
  return /^[^/]+\/[^/]+$/.test(fullName) ? fullName : null;
}

/** Whether the link file's text names `org/project` (a line of its own; `#` starts a comment; letter case ignored). */
export function linkFileNames(text: string, organization: string, project: string): boolean {
  const wanted = `${organization}/${project}`.toLowerCase();
  return text.split(/\r?\n/).some((line) => line.replace(/#.*$/, '').trim().toLowerCase() === wanted);
}

interface Covering { installation_id: string; repository_id: string; full_name: string }

export function repositoryAccess(deps: RepositoryAccessDeps) {
  const { sql, api, clock } = deps;
  const recheckMs = deps.recheckMs ?? DEFAULT_RECHECK_MS;
  const resolve = deps.resolve ?? (async (name: string) => (await dnsLookup(name, { all: true, verbatim: true })).map((a) => a.address));
  /** projects found unlinked, until when (epoch ms): a public repository without the file costs one read per interval, not one per evaluation */
  const unlinkedUntil = new Map<string, { key: string; until: number }>();

  /** The link file's text on the default branch, or null when there is none. */
  async function readLinkFile(installationId: number, fullName: string): Promise<string | null> {
    const [owner, repo] = fullName.split('/') as [string, string];
    try {
      const answer = await api.call(installationId, 'GET /repos/{owner}/{repo}/contents/{path}', { owner, repo, path: LINK_FILE });
      const data = answer.data as { type?: unknown; encoding?: unknown; content?: unknown };
      if (data.type !== 'file' || data.encoding !== 'base64' || typeof data.content !== 'string') return null;
      return Buffer.from(data.content.slice(0, Math.ceil(LINK_FILE_MAX_BYTES / 3) * 4 + 4096), 'base64').subarray(0, LINK_FILE_MAX_BYTES).toString('utf8');
    } catch (error) {
      if (error instanceof HostApiError && error.status === 404) return null;
      throw error;
    }
  }

  /** `host:port:addresses` for git, after every address passed outbound.allowedNetworks; null for an IP literal. */
  async function pin(url: URL): Promise<string | null> {
    const host = urlHost(url);
    const port = url.port !== '' ? Number(url.port) : url.protocol === 'https:' ? 443 : 80;
    const addresses = host.kind === 'ip' ? [host.address] : await resolve(host.name).catch(() => []);
    if (addresses.length === 0) throw new HostApiError(`${url.hostname} has no address`, 0, {});
    for (const address of addresses) {
      const why = deps.outbound.policy.refusal(address);
      if (why !== null) throw new HostApiError(`the clone address ${url.hostname} is refused: ${why} (outbound.allowedNetworks)`, 0, {});
    }
    if (host.kind === 'ip') return null;
    return `${host.name}:${port}:${addresses.map((a) => (a.includes(':') ? `[${a}]` : a)).join(',')}`;
  }

  /** Whether the project is linked to the repository now: a fresh link row, else the file read again. */
  async function linked(project: { id: string; organization: string; name: string }, key: string, covering: Covering): Promise<boolean> {
    const now = clock.now();
    const [link] = await sql<{ verified_at: Date }[]>`
      select verified_at from project_git_host_links
      where project_id = ${project.id} and installation_id = ${covering.installation_id} and repository_id = ${covering.repository_id} and repository_key = ${key}`;
    if (link && now.getTime() - link.verified_at.getTime() < recheckMs) return true;
    const unlinked = unlinkedUntil.get(project.id);
    if (!link && unlinked && unlinked.key === key && unlinked.until > now.getTime()) return false;
    const text = await readLinkFile(Number(covering.installation_id), covering.full_name);
    if (text === null || !linkFileNames(text, project.organization, project.name)) {
      await sql`delete from project_git_host_links where project_id = ${project.id}`;
      unlinkedUntil.set(project.id, { key, until: now.getTime() + recheckMs });
      if (unlinkedUntil.size > 10_000) unlinkedUntil.clear();
      if (link) deps.log.info({ project: `${project.organization}/${project.name}`, repository: covering.full_name }, `the repository's ${LINK_FILE} no longer names the project: unlinked`);
      return false;
    }
    await sql`
      insert into project_git_host_links (project_id, installation_id, repository_id, repository_key, verified_at)
      values (${project.id}, ${covering.installation_id}, ${covering.repository_id}, ${key}, ${now})
      on conflict (project_id) do update set installation_id = excluded.installation_id, repository_id = excluded.repository_id,
        repository_key = excluded.repository_key, verified_at = excluded.verified_at`;
    unlinkedUntil.delete(project.id);
    return true;
  }

  return {
    /**
     * How an evaluation of `projectId` at `repository` (the URL the evaluation recorded) is fetched:
     * with a token when the project is linked, null when it is not (fetched as any repository is).
     * Throws HostApiError when the host cannot be asked or the clone address is refused.
     */
    async privateFetch(projectId: string, repository: string): Promise<PrivateFetch | null> {
      const fullName = hostedFullName(repository, deps.cloneUrl);
      if (fullName === null) return null;
      const [covering] = await sql<Covering[]>`
        select r.installation_id::text, r.repository_id::text, r.full_name
        from git_host_repositories r join git_host_installations i on i.id = r.installation_id
        where r.full_name = ${fullName} and not i.suspended order by i.updated_at desc limit 1`;
      if (!covering) return null;
      const [project] = await sql<{ id: string; organization: string; name: string }[]>`
        select p.id, o.name as organization, p.name from projects p join organizations o on o.id = p.organization_id where p.id = ${projectId}`;
      if (!project) return null;
      const key = repositoryKey(repository)!;
      if (!(await linked(project, key, covering))) return null;
      const url = new URL(`${deps.cloneUrl}/${covering.full_name}.git`);
      const resolveEntry = await pin(url);
      const token = await api.repositoryReadToken(Number(covering.installation_id), Number(covering.repository_id));
      return {
        repository: url.href, access: { token, resolve: resolveEntry },
        installationId: Number(covering.installation_id), repositoryId: Number(covering.repository_id), fullName: covering.full_name,
      };
    },
  };
}
type RepositoryAccessService = ReturnType<typeof repositoryAccess>;
