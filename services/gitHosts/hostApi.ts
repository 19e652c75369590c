// Talking to the Git host's REST API as the application (docs/git-hosts.md): an RS256 JWT made
// from gitHostApp.id and gitHostApp.privateKeyFile buys an installation token
// (POST /app/installations/{id}/access_tokens), which @octokit/auth-app caches until shortly
// before it expires; each call then goes out with that token. Calls go only to gitHostApp.apiUrl,
// never to an address a webhook payload names (whoever holds the webhook secret must not be able
// to send the app's tokens elsewhere), and every connection goes through the outbound client, so
// outbound.allowedNetworks holds for the host as for webhooks.
import type { createAppAuth } from '@octokit/auth-app';
import type { request as octokitRequest } from '@octokit/request';
import { outboundFetch, type OutboundClient } from '../../storage/index.js';

export interface HostApiSettings {
  /** gitHostApp.apiUrl: the REST API's base, without a trailing slash */
  apiUrl: string;
  /** gitHostApp.id */
  appId: number;
  /** the PEM text of gitHostApp.privateKeyFile */
  privateKey: () => string;
  outbound: OutboundClient;
  /** User-Agent of every call, e.g. kiln/0.1.0 */
  userAgent: string;
  /** bound on one call (default 10 s) */
  timeoutMs?: number;
}

export interface HostResponse {
  status: number;
  headers: Record<string, string | number | undefined>;
  data: unknown;
}

/** A refused or failed call: the status (0: no answer) and the headers that say when to come back. */
export class HostApiError extends Error {
  constructor(message: string, readonly status: number, readonly headers: Record<string, string | number | undefined>) {
    super(message);
    this.name = 'HostApiError';
  }
}

/** A git author: who a commit says made it. */
export interface BotIdentity {
  name: string;
  email: string;
}

export interface HostApi {
  /** an installation token for cloning and API calls; cached until it nears expiry */
  installationToken(installationId: number): Promise<string>;
  /**
   * A token that can only read one repository's contents (cached until it nears expiry): what a
   * worker fetching a private repository gets, so a leaked one opens nothing else of the installation.
   */
  repositoryReadToken(installationId: number, repositoryId: number): Promise<string>;
  /**
   * A token that may write one repository's contents and nothing else (the open_pr action's push):
   * what a worker pushing the pull request's branch gets.
   */
  repositoryWriteToken(installationId: number, repositoryId: number): Promise<string>;
  /**
   * The application's bot user as a git identity, what the host itself writes for the app:
   * `<slug>[bot] <<user id>+<slug>[bot]@users.noreply.<host>>` (GET /app as the app for the slug,
   * then GET /users/<slug>[bot] for the id). Asked once per process; a failure is asked again.
   */
  botIdentity(installationId: number): Promise<BotIdentity>;
  /** one REST call as the installation: `call(42, 'POST /repos/{owner}/{repo}/check-runs', { owner, repo, … })` */
  call(installationId: number, route: string, parameters: Record<string, unknown>): Promise<HostResponse>;
}

interface FailedRequest {
  status: number;
  message: string;
  response?: { headers: Record<string, string | number | undefined> };
}
const isFailedRequest = (e: unknown): e is FailedRequest =>
  e instanceof Error && typeof (e as Partial<FailedRequest>).status === 'number';

interface Octokit {
  request: typeof octokitRequest;
  auth: ReturnType<typeof createAppAuth>;
}

export function createHostApi(settings: HostApiSettings): HostApi {
  const fetchOut = outboundFetch(settings.outbound);
  const timeoutMs = settings.timeoutMs ?? 10_000;
  // octokit's fetch: only what it passes is forwarded; redirects are refused (the configured API
  // is the one called, not wherever it points on).
  const fetch = (async (input: string | URL | Request, init: RequestInit = {}) => {
    const url = input instanceof Request ? input.url : input;
    const body = typeof init.body === 'string' ? init.body : init.body == null ? null : String(init.body);
    return fetchOut(url, {
      method: init.method ?? 'GET',
      headers: new Headers(init.headers),
      body,
      signal: AbortSignal.any([AbortSignal.timeout(timeoutMs), ...(init.signal ? [init.signal] : [])]),
      redirect: 'error',
    });
  }) as typeof globalThis.fetch;
  // GitHub's noreply addresses: users.noreply.github.com for api.github.com, users.noreply.<host> on a server of one's own
  const noreplyHost = new URL(settings.apiUrl).hostname.replace(/^api\./, '');
  // octokit is loaded at the first call, not at start (docs/http.md, "Memory at rest"): a server
  // without the app never loads it; a load that failed is tried again at the next call.
  let octokit: Promise<Octokit> | null = null;
  const octokitOf = (): Promise<Octokit> => {
    octokit ??= (async () => {
      const [{ createAppAuth: appAuth }, { request: plain }] = await Promise.all([import('@octokit/auth-app'), import('@octokit/request')]);
      const request = plain.defaults({ baseUrl: settings.apiUrl.replace(/\/+$/, ''), headers: { 'user-agent': settings.userAgent }, request: { fetch } });
      // the key is read at the first call, not at start (a missing file is a failed report, not a failed start)
      return { request, auth: appAuth({ appId: settings.appId, privateKey: settings.privateKey(), request }) };
    })();
    octokit.catch(() => {
      octokit = null;
    });
    return octokit;
  };
  const authOf = async () => (await octokitOf()).auth;

  const failure = (what: string, e: unknown): HostApiError => {
    if (isFailedRequest(e)) return new HostApiError(`${what}: ${e.status} ${e.message.slice(0, 300)}`, e.status, e.response?.headers ?? {});
    return new HostApiError(`${what}: ${e instanceof Error ? e.message : String(e)}`.slice(0, 500), 0, {});
  };

  async function installationToken(installationId: number): Promise<string> {
    try {
      return (await (await authOf())({ type: 'installation', installationId })).token;
    } catch (e) {
      throw failure(`installation token of installation ${installationId}`, e);
    }
  }

  async function scopedToken(installationId: number, repositoryId: number, contents: 'read' | 'write'): Promise<string> {
    try {
      return (await (await authOf())({ type: 'installation', installationId, repositoryIds: [repositoryId], permissions: { contents } })).token;
    } catch (e) {
      throw failure(`${contents} token of repository ${repositoryId} (installation ${installationId})`, e);
    }
  }

  let bot: Promise<BotIdentity> | null = null;
  async function askBotIdentity(installationId: number): Promise<BotIdentity> {
    let slug: unknown;
    try {
      const { request, auth } = await octokitOf();
      const { token: jwt } = await auth({ type: 'app' });
      slug = (await request('GET /app', { headers: { authorization: `bearer ${jwt}` } })).data?.slug;
    } catch (e) {
      throw failure('GET /app', e);
    }
    if (typeof slug !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9-]{0,99}$/.test(slug)) throw new HostApiError('GET /app: the answer has no application slug', 0, {});
    const login = `${slug}[bot]`;
    const user = await call(installationId, 'GET /users/{username}', { username: login });
    const id = (user.data as { id?: unknown } | null)?.id;
    if (typeof id !== 'number' || !Number.isSafeInteger(id) || id <= 0) throw new HostApiError(`GET /users/${login}: the answer has no user id`, user.status, user.headers);
    return { name: login, email: `${id}+${login}@users.noreply.${noreplyHost}` };
  }

  async function call(installationId: number, route: string, parameters: Record<string, unknown>): Promise<HostResponse> {
    const token = await installationToken(installationId);
    try {
      const { request } = await octokitOf();
      const answer = await request(route, { ...parameters, headers: { authorization: `token ${token}` } });
      return { status: answer.status, headers: answer.headers, data: answer.data };
    } catch (e) {
      throw failure(route, e);
    }
  }

  return {
    installationToken,
    repositoryReadToken: (installationId, repositoryId) => scopedToken(installationId, repositoryId, 'read'),
    repositoryWriteToken: (installationId, repositoryId) => scopedToken(installationId, repositoryId, 'write'),
    async botIdentity(installationId) {
      bot ??= askBotIdentity(installationId);
      try {
        return await bot;
      } catch (e) {
        bot = null;
        throw e;
      }
    },
    call,
  };
}
