// A Git host on loopback speaking the REST wire format of GitHub's App API, for the handful of
// endpoints kiln calls: POST /app/installations/{id}/access_tokens (the app's RS256 JWT checked
// with the app's public key), check runs (create, update) and commit statuses (each checked for
// an installation token it issued). It records every call, can answer the next calls of a route
// with a failure (500, 429 with Retry-After), and can act as a host without check runs (Gitea).
// It also sends webhooks signed exactly as GitHub does, from real captured payloads
// (@octokit/webhooks-examples) rewritten to point at a local repository and at itself.
// Hosted repositories (`host.hostRepository`) are served as GitHub serves private ones: git's smart
// HTTP through the real `git http-backend` at /<owner>/<name>.git, only to HTTP Basic
// `x-access-token:<token>` with an installation token that covers the repository (a push, git's
// receive-pack, only with contents: write), and their files through
// GET /repos/{owner}/{repo}/contents/{path} (the default branch). Pull requests of hosted
// repositories: GET (by head and state), POST and PATCH /repos/{owner}/{repo}/pulls, in the REST
// API's shape (a head branch that does not exist, or one with an open pull request, is 422).
// The app itself: GET /app (with the app's JWT: its slug) and its bot user GET /users/<slug>[bot].
import { generateKeyPairSync, randomBytes, randomUUID, type KeyObject } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { jwtVerify } from 'jose';
import { Webhooks } from '@octokit/webhooks';
import { createRequire } from 'node:module';
import type { Test } from 'tap';
import { signUp } from './accounts.js';
import { createTestCache, type TestCache } from './caches.js';
import type { ApiResult, TestKiln } from './kiln.js';

/** The captured payloads, by event (the package's main is a JSON file). */
const examples = createRequire(import.meta.url)('@octokit/webhooks-examples') as { name: string; examples: unknown[] }[];

export interface HostCall {
  method: string;
  path: string;
  body: Record<string, unknown>;
  /** the installation whose token authorised it (null for the token route itself) */
  installation: number | null;
}

/** An installation token as issued: its installation and, when scoped, its repositories and permissions. */
export interface IssuedToken {
  installation: number;
  repositoryIds: number[] | null;
  permissions: Record<string, string> | null;
}

/** One git request to a hosted repository. */
export interface GitRequest {
  repository: string;
  path: string;
  /** the token it came with (null: none), and whether it was let in */
  token: string | null;
  allowed: boolean;
  /** git-receive-pack: a push */
  push: boolean;
}

/** A pull request of a hosted repository, as the host keeps it. */
export interface HostedPullRequest {
  repository: string;
  number: number;
  head: string;
  base: string;
  title: string;
  body: string;
  state: 'open' | 'closed';
}

export interface FailureAnswer {
  status: number;
  headers?: Record<string, string>;
}

export interface TestGitHost {
  /** http://127.0.0.1:<port>: the API base its payloads name */
  url: string;
  appId: number;
  /** the app's slug (GET /app) and its bot user's id (GET /users/<slug>[bot]) */
  appSlug: string;
  botUserId: number;
  /** a file holding the app's private key (gitHostApp.privateKeyFile) */
  privateKeyFile: string;
  /** a file holding the webhook secret (gitHostApp.webhookSecretFile) */
  secretFile: string;
  secret: string;
  calls: HostCall[];
  /** installation tokens issued so far */
  tokensIssued: number;
  /** answers the next calls whose "METHOD /path" matches `route` with these failures, in order */
  failNext(route: RegExp, answers: FailureAnswer[]): void;
  /** false: check-run routes answer 404, as on a host without check runs */
  checkRuns: boolean;
  /** every token issued, by token */
  tokens: Map<string, IssuedToken>;
  /** git requests to hosted repositories */
  gitRequests: GitRequest[];
  /** pull requests opened through the API */
  pullRequests: HostedPullRequest[];
  /** the commit at a branch of a hosted repository, null when there is no such branch */
  branchHead(fullName: string, branch: string): string | null;
  /**
   * Serves the repository at `source` (a work tree or bare repository) as the private repository
   * `fullName` with this id; again after new commits in `source`: the hosted copy is fetched anew.
   */
  hostRepository(fullName: string, id: number, source: string): void;
  close(): Promise<void>;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    req.on('error', reject);
  });
}

export async function startTestGitHost(dir: string, appId = 4242): Promise<TestGitHost> {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const privateKeyFile = join(dir, 'app-key.pem');
  writeFileSync(privateKeyFile, privateKey.export({ type: 'pkcs1', format: 'pem' }));
  const secret = `hook-secret-${randomUUID()}`;
  const secretFile = join(dir, 'hook-secret');
  writeFileSync(secretFile, `${secret}\n`);
  const tokens = new Map<string, IssuedToken>();
  const hosted = new Map<string, number>();
  const hostedRoot = join(dir, 'hosted');
  const failures: { route: RegExp; answers: FailureAnswer[] }[] = [];
  let nextCheckRun = 1000;

  const host: TestGitHost = {
    url: '', appId, appSlug: 'kiln-test-app', botUserId: 41898282, privateKeyFile, secretFile, secret, calls: [], tokensIssued: 0, checkRuns: true, tokens, gitRequests: [], pullRequests: [],
    branchHead: (fullName, branch) => {
      try {
        return execFileSync('git', ['-C', join(hostedRoot, `${fullName}.git`), 'rev-parse', '--verify', '--quiet', `refs/heads/${branch}`], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
      } catch {
        return null;
      }
    },
    hostRepository: (fullName, id, source) => {
      const bare = join(hostedRoot, `${fullName}.git`);
      if (!hosted.has(fullName)) {
        mkdirSync(join(bare, '..'), { recursive: true });
        execFileSync('git', ['clone', '--quiet', '--bare', source, bare]);
      } else {
        execFileSync('git', ['-C', bare, 'fetch', '--quiet', '--force', source, '+refs/heads/*:refs/heads/*']);
      }
      hosted.set(fullName, id);
    },
    failNext: (route, answers) => {
      failures.push({ route, answers: [...answers] });
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };

  const send = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers });
    res.end(JSON.stringify(body));
  };

  async function appJwtOk(req: IncomingMessage, key: KeyObject): Promise<boolean> {
    const bearer = /^Bearer (.+)$/i.exec(req.headers.authorization ?? '')?.[1];
    if (!bearer) return false;
    try {
      const { payload } = await jwtVerify(bearer, key, { algorithms: ['RS256'] });
      return String(payload.iss) === String(appId);
    } catch {
      return false;
    }
  }

  /** git's smart HTTP for a hosted repository: the token must be an installation token that covers it. */
  function serveGit(req: IncomingMessage, res: ServerResponse, fullName: string, rest: string): void {
    const basic = /^Basic (.+)$/i.exec(req.headers.authorization ?? '')?.[1];
    const [user, token] = basic ? Buffer.from(basic, 'base64').toString('utf8').split(':') : [];
    const issued = token === undefined ? undefined : tokens.get(token);
    const id = hosted.get(fullName)!;
    const covers = user === 'x-access-token' && issued !== undefined && (issued.repositoryIds === null || issued.repositoryIds.includes(id));
    const push = rest.includes('git-receive-pack');
    // a push needs contents: write (an unscoped token here has the app's read permission only)
    const mayWrite = issued?.permissions?.['contents'] === 'write';
    const allowed = covers && (!push || mayWrite);
    host.gitRequests.push({ repository: fullName, path: rest, token: token ?? null, allowed, push });
    if (!covers) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="GitHub"', 'content-type': 'text/plain' });
      res.end('Invalid username or token.');
      return;
    }
    if (!allowed) {
      res.writeHead(403, { 'content-type': 'text/plain' });
      res.end(`Permission to ${fullName}.git denied to kiln[bot].`);
      return;
    }
    const [pathInfo, query = ''] = rest.split('?') as [string, string?];
    const cgi = spawn('/usr/lib/git-core/git-http-backend', [], {
      env: {
        PATH: process.env['PATH'], GIT_PROJECT_ROOT: hostedRoot, GIT_HTTP_EXPORT_ALL: '1', PATH_INFO: `/${fullName}.git${pathInfo}`, QUERY_STRING: query,
        REQUEST_METHOD: req.method ?? 'GET', CONTENT_TYPE: req.headers['content-type'] ?? '', REMOTE_USER: user, REMOTE_ADDR: '127.0.0.1',
        GIT_PROTOCOL: req.headers['git-protocol'] as string | undefined ?? '', HTTP_CONTENT_ENCODING: req.headers['content-encoding'] ?? '',
      },
    });
    req.pipe(cgi.stdin);
    const out: Buffer[] = [];
    cgi.stdout.on('data', (c: Buffer) => out.push(c));
    cgi.on('close', () => {
      const all = Buffer.concat(out);
      const split = all.indexOf('\r\n\r\n');
      const head = all.subarray(0, split).toString('utf8').split('\r\n');
      const headers: Record<string, string> = {};
      let status = 200;
      for (const line of head) {
        const [name, ...value] = line.split(':');
        if (name!.toLowerCase() === 'status') status = Number(value.join(':').trim().split(' ')[0]);
        else headers[name!.toLowerCase()] = value.join(':').trim();
      }
      res.writeHead(status, headers);
      res.end(all.subarray(split + 4));
    });
  }

  /** GET /repos/{owner}/{repo}/contents/{path}: a file of the default branch, as GitHub answers it (base64). */
  function contents(res: ServerResponse, fullName: string, path: string): void {
    const id = hosted.get(fullName);
    if (id === undefined) return send(res, 404, { message: 'Not Found' });
    let data: Buffer;
    try {
      data = execFileSync('git', ['-C', join(hostedRoot, `${fullName}.git`), 'show', `HEAD:${path}`], { stdio: ['ignore', 'pipe', 'ignore'] });
    } catch {
      return send(res, 404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest/repos/contents#get-repository-content' });
    }
    return send(res, 200, { type: 'file', encoding: 'base64', size: data.length, name: path.split('/').at(-1), path, content: data.toString('base64').replace(/(.{60})/g, '$1\n') });
  }

  /** /repos/{owner}/{repo}/pulls[/{number}] of a hosted repository, as GitHub's REST API answers. */
  function pulls(res: ServerResponse, method: string, fullName: string, number: number | null, query: URLSearchParams, body: Record<string, unknown>): void {
    const view = (p: HostedPullRequest) => ({
      number: p.number, state: p.state, title: p.title, body: p.body, html_url: `${host.url}/${p.repository}/pull/${p.number}`,
      url: `${host.url}/repos/${p.repository}/pulls/${p.number}`,
      head: { ref: p.head, label: `${p.repository.split('/')[0]}:${p.head}`, sha: host.branchHead(p.repository, p.head) },
      base: { ref: p.base, label: `${p.repository.split('/')[0]}:${p.base}` },
    });
    const owner = fullName.split('/')[0]!;
    const mine = host.pullRequests.filter((p) => p.repository === fullName);
    if (method === 'GET' && number === null) {
      const head = query.get('head');
      const state = query.get('state') ?? 'open';
      return send(res, 200, mine.filter((p) => (head === null || `${owner}:${p.head}` === head) && (state === 'all' || p.state === state)).map(view));
    }
    if (method === 'POST' && number === null) {
      const head = String(body['head'] ?? '');
      const base = String(body['base'] ?? '');
      if (host.branchHead(fullName, head) === null || host.branchHead(fullName, base) === null) {
        return send(res, 422, { message: 'Validation Failed', errors: [{ resource: 'PullRequest', field: head === '' ? 'head' : 'base', code: 'invalid' }] });
      }
      if (mine.some((p) => p.head === head && p.state === 'open')) {
        return send(res, 422, { message: 'Validation Failed', errors: [{ resource: 'PullRequest', code: 'custom', message: `A pull request already exists for ${owner}:${head}.` }] });
      }
      const made: HostedPullRequest = { repository: fullName, number: host.pullRequests.length + 1, head, base, title: String(body['title'] ?? ''), body: String(body['body'] ?? ''), state: 'open' };
      host.pullRequests.push(made);
      return send(res, 201, view(made));
    }
    const found = mine.find((p) => p.number === number);
    if (method === 'PATCH' && found) {
      if (typeof body['title'] === 'string') found.title = body['title'];
      if (typeof body['body'] === 'string') found.body = body['body'];
      return send(res, 200, view(found));
    }
    return send(res, 404, { message: 'Not Found' });
  }

  const server: Server = createServer((req, res) => {
    const gitRoute = /^\/([^/]+\/[^/]+)\.git(\/.*)$/.exec(req.url ?? '');
    if (gitRoute && hosted.has(gitRoute[1]!)) return serveGit(req, res, gitRoute[1]!, gitRoute[2]!);
    void (async () => {
      const text = await readBody(req);
      const path = (req.url ?? '/').split('?')[0]!;
      const query = new URLSearchParams((req.url ?? '').split('?')[1] ?? '');
      const method = req.method ?? 'GET';
      const body = text === '' ? {} : (JSON.parse(text) as Record<string, unknown>);
      const tokenRoute = /^\/app\/installations\/(\d+)\/access_tokens$/.exec(path);
      if (method === 'POST' && tokenRoute) {
        if (!(await appJwtOk(req, publicKey))) return send(res, 401, { message: 'A JSON web token could not be decoded' });
        const token = `ghs_${randomUUID().replace(/-/g, '')}`;
        const repositoryIds = Array.isArray(body['repository_ids']) ? (body['repository_ids'] as number[]) : null;
        const permissions = typeof body['permissions'] === 'object' && body['permissions'] !== null ? (body['permissions'] as Record<string, string>) : null;
        tokens.set(token, { installation: Number(tokenRoute[1]), repositoryIds, permissions });
        host.tokensIssued += 1;
        host.calls.push({ method, path, body, installation: null });
        return send(res, 201, {
          token, expires_at: new Date(Date.now() + 3600_000).toISOString(), permissions: { checks: 'write', statuses: 'write', contents: 'read' }, repository_selection: 'all',
        });
      }
      const failure = failures.find((f) => f.route.test(`${method} ${path}`) && f.answers.length > 0);
      if (method === 'GET' && path === '/app') {
        // the app itself: only with the app's JWT, as GitHub answers it
        if (!(await appJwtOk(req, publicKey))) return send(res, 401, { message: 'A JSON web token could not be decoded' });
        host.calls.push({ method, path, body, installation: null });
        const failed = failure?.answers.shift();
        if (failed) return send(res, failed.status, { message: `failure ${failed.status} on purpose` }, failed.headers ?? {});
        return send(res, 200, { id: appId, slug: host.appSlug, name: 'Kiln test app', owner: { login: 'acme', type: 'Organization' } });
      }
      const installation = tokens.get(/^token (.+)$/i.exec(req.headers.authorization ?? '')?.[1] ?? '')?.installation;
      if (installation === undefined) return send(res, 401, { message: 'Bad credentials' });
      if (failure) {
        const answer = failure.answers.shift()!;
        host.calls.push({ method, path, body, installation });
        return send(res, answer.status, { message: `failure ${answer.status} on purpose` }, answer.headers ?? {});
      }
      const user = /^\/users\/([^/]+)$/.exec(path);
      if (method === 'GET' && user) {
        host.calls.push({ method, path, body, installation });
        const login = decodeURIComponent(user[1]!);
        if (login !== `${host.appSlug}[bot]`) return send(res, 404, { message: 'Not Found' });
        return send(res, 200, { login, id: host.botUserId, type: 'Bot', html_url: `${host.url}/apps/${host.appSlug}` });
      }
      const file = /^\/repos\/([^/]+\/[^/]+)\/contents\/(.+)$/.exec(path);
      if (method === 'GET' && file) {
        host.calls.push({ method, path, body, installation });
        return contents(res, file[1]!.toLowerCase(), decodeURIComponent(file[2]!));
      }
      const pull = /^\/repos\/([^/]+\/[^/]+)\/pulls(?:\/(\d+))?$/.exec(path);
      if (pull && hosted.has(pull[1]!.toLowerCase())) {
        host.calls.push({ method, path, body, installation });
        return pulls(res, method, pull[1]!.toLowerCase(), pull[2] === undefined ? null : Number(pull[2]), query, body);
      }
      if (/^\/repos\/[^/]+\/[^/]+\/check-runs(\/\d+)?$/.test(path) && !host.checkRuns) return send(res, 404, { message: 'Not Found' });
      host.calls.push({ method, path, body, installation });
      if (method === 'POST' && /^\/repos\/[^/]+\/[^/]+\/check-runs$/.test(path)) return send(res, 201, { id: nextCheckRun++, ...body });
      const update = /^\/repos\/[^/]+\/[^/]+\/check-runs\/(\d+)$/.exec(path);
      if (method === 'PATCH' && update) return send(res, 200, { id: Number(update[1]), ...body });
      if (method === 'POST' && /^\/repos\/[^/]+\/[^/]+\/statuses\/[0-9a-f]+$/.test(path)) return send(res, 201, { id: 1, ...body });
      return send(res, 404, { message: 'Not Found' });
    })().catch((error: unknown) => send(res, 500, { message: String(error) }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  host.url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return host;
}

/** The gitHostApp.* options of a kiln that talks to `host`. */
export function gitHostOptions(host: TestGitHost): Record<string, unknown> {
  return {
    'gitHostApp.enable': true, 'gitHostApp.id': host.appId, 'gitHostApp.privateKeyFile': host.privateKeyFile,
    'gitHostApp.webhookSecretFile': host.secretFile, 'gitHostApp.apiUrl': host.url,
  };
}

type Example = Record<string, unknown> & { action?: string };

/** A real captured payload of `event` (the first with `action`, when given), as a fresh copy. */
export function examplePayload(event: string, action?: string): Example {
  const definition = examples.find((d) => d.name === event);
  const found = definition?.examples.find((e) => action === undefined || (e as Example).action === action);
  if (!found) throw new Error(`no example payload of ${event}${action ? `.${action}` : ''}`);
  return structuredClone(found) as Example;
}

/**
 * The open_pr tests' project: ada's organization acme, its project app on the hosted `url` (the
 * x86_64-linux packages), writing into a public cache main, with the task action "bump version"
 * (a command that rewrites the file `version`). `action` is the PUT's answer, for the caller's checks.
 */
export async function openPrProject<A>(t: Test, kiln: TestKiln, url: string): Promise<{ token: string; cache: TestCache; action: ApiResult<A> }> {
  const { token } = await signUp(kiln, 'ada');
  await kiln.api('PUT', '/orgs', { token, body: { name: 'acme' } });
  const cache = await createTestCache(kiln.sql, 'main', { public: true });
  t.equal((await kiln.api('PUT', '/projects/acme', { token, body: { name: 'app', repository: url, wildcard: 'packages.x86_64-linux.*' } })).status, 200);
  await kiln.sql`insert into subscriptions (project_id, cache_id, mode) select id, ${cache.id}, 0 from projects where name = 'app'`;
  const action = await kiln.api<A>('PUT', '/tasks/app/default/actions', {
    token, body: { kind: 'open_pr', name: 'bump version', command: ['sh', '-c', 'echo "bumped from $(cat version)" > version'] },
  });
  return { token, cache, action };
}

/** A real `installation.created` payload of installation `id`, granted the one private repository `fullName` (id `repositoryId`). */
export function installationPayload(id: number, repositoryId: number, fullName: string): Example {
  const installed = examplePayload('installation', 'created');
  Object.assign(installed['installation'] as object, { id });
  const name = fullName.split('/')[1]!;
  installed['repositories'] = [{ id: repositoryId, node_id: `R_${name}`, name, full_name: fullName, private: true }];
  return installed;
}

/**
 * The payload's repository rewritten to `fullName` at the local `cloneUrl`, its API addresses under
 * `host` (kiln calls gitHostApp.apiUrl whatever they say), a fresh `before` (no two real pushes have
 * the same body; kiln drops a replayed body).
 */
export function pointAt(payload: Example, host: TestGitHost, fullName: string, cloneUrl: string, installationId: number | null): Example {
  const repository = payload['repository'] as Record<string, unknown>;
  Object.assign(repository, {
    full_name: fullName, name: fullName.split('/')[1], clone_url: cloneUrl, html_url: cloneUrl, ssh_url: cloneUrl, git_url: cloneUrl,
    hooks_url: `${host.url}/repos/${fullName}/hooks`, url: `${host.url}/repos/${fullName}`, default_branch: 'main',
  });
  if ('before' in payload) payload['before'] = randomBytes(20).toString('hex');
  if (installationId === null) delete payload['installation'];
  else payload['installation'] = { id: installationId, node_id: 'MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uMQ==' };
  return payload;
}

export interface SentHook {
  status: number;
  json: { error: boolean; message: unknown; code?: string };
}

/** POSTs a webhook to kiln as GitHub does: JSON body, X-GitHub-Event, X-GitHub-Delivery, X-Hub-Signature-256. */
export async function sendHook(
  kilnUrl: string, event: string, body: string | Record<string, unknown>,
  opts: { secret: string; delivery?: string; headers?: Record<string, string | null>; signature?: string },
): Promise<SentHook> {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  const signature = opts.signature ?? await new Webhooks({ secret: opts.secret }).sign(text);
  const headers: Record<string, string | null> = {
    'content-type': 'application/json', 'user-agent': 'GitHub-Hookshot/test', 'x-github-event': event,
    'x-github-delivery': opts.delivery ?? randomUUID(), 'x-hub-signature-256': signature, ...opts.headers,
  };
  const res = await fetch(`${kilnUrl}/api/v1/hooks/github`, {
    method: 'POST', body: text, headers: Object.fromEntries(Object.entries(headers).filter((e): e is [string, string] => e[1] !== null)),
  });
  return { status: res.status, json: (await res.json()) as SentHook['json'] };
}
