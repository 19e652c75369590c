// The response types of the OpenAPI document (http/openApiRoutes.ts) are what the routes answer:
// every route declares what a success looks like (a typed envelope, a raw body, nothing, or a
// WebSocket), and each route called here, on a real server with real rows, has its envelope's
// message parsed with the declared schema (strict objects: a field the server adds or drops fails)
// and its status compared with the declared one. A route whose declared type drifted goes red.
import t from 'tap';
import { startTestKiln } from '../../../support/kiln.js';
import { freshAddress, signUp } from '../../../support/accounts.js';
import { buildFixturePaths, requireNix } from '../../../support/nixStore.js';
import { uploadStorePath } from '../../../support/restUpload.js';
import { routeSchemas } from '../../../../http/openApiRoutes.js';
import { generateSshKeyPair } from '../../../../services/organizations/sshKeys.js';

t.test('every route declares what its success answers', async (t) => {
  const untyped = Object.entries(routeSchemas)
    .filter(([, s]) => !s.response && !s.rawResponse && !s.emptyResponse && !s.socket)
    .map(([key]) => key);
  t.same(untyped, [], 'routes without a response type in http/openApiRoutes.ts');
});

t.test('declared response types match live answers', async (t) => {
  requireNix();
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  const bob = await signUp(kiln, 'bob');
  // The first account is a superuser, who adds members without invitations: not until the admin part.
  await kiln.sql`update users set superuser = false`;
  const checked = new Set<string>();

  /** Calls `path` as `key` says and checks the answer against the route's declared type; returns the message. */
  async function call<T = Record<string, unknown>>(key: string, path: string, opts: { token?: string | null; body?: unknown; headers?: Record<string, string> } = {}): Promise<T> {
    const declared = routeSchemas[key];
    t.ok(declared?.response, `${key} declares its response`);
    const [method] = key.split(' ');
    const token = opts.token === null ? undefined : (opts.token ?? ada.token);
    const res = await kiln.api<T>(method!.toUpperCase(), path, { ...(token ? { token } : {}), ...(opts.body !== undefined ? { body: opts.body } : {}), ...(opts.headers ? { headers: opts.headers } : {}) });
    t.equal(res.status, declared?.status ?? 200, `${key}: ${JSON.stringify(res.message).slice(0, 300)}`);
    if (declared?.response) {
      const parsed = declared.response.safeParse(res.message);
      t.ok(parsed.success, `${key} answers its declared type${parsed.success ? '' : `: ${parsed.error.message.slice(0, 1500)}`}`);
      checked.add(key);
    }
    return res.message;
  }

  // Accounts
  await call('get /api/v1/health', '/health', { token: null });
  await call('post /api/v1/auth/check-username', '/auth/check-username', { token: null, body: { username: 'zed' }, headers: freshAddress() });
  await call('post /api/v1/auth/basic/register', '/auth/basic/register', { token: null, body: { username: 'cy', email: 'cy@example.test', password: 'pw-cy-secret' }, headers: freshAddress() });
  const cySession = await call<string>('post /api/v1/auth/basic/login', '/auth/basic/login', { token: null, body: { loginname: 'cy', password: 'pw-cy-secret' }, headers: freshAddress() });
  await call('post /api/v1/auth/resend-verification', '/auth/resend-verification', { token: null, body: { email: 'cy@example.test' }, headers: freshAddress() });
  await call('get /api/v1/user', '/user');
  await call('get /api/v1/user/settings', '/user/settings');
  await call('patch /api/v1/user/settings', '/user/settings', { body: { name: 'Ada L' } });
  await call('post /api/v1/user/ssh-keys', '/user/ssh-keys', { body: { name: 'laptop', public_key: generateSshKeyPair('laptop').publicKey } });
  await call('get /api/v1/user/ssh-keys', '/user/ssh-keys');
  await call('delete /api/v1/user/ssh-keys', '/user/ssh-keys?name=laptop');
  await call('post /api/v1/user/keys', '/user/keys', { body: { name: 'ci', permissions: ['viewProject'] } });
  await call('get /api/v1/user/keys', '/user/keys');
  await call('delete /api/v1/user/keys', '/user/keys?name=ci');
  const sessions = await call<{ id: string; current: boolean }[]>('get /api/v1/user/sessions', '/user/sessions', { token: cySession });
  await call('delete /api/v1/user/sessions/:session', `/user/sessions/${sessions[0]!.id}`, { token: cySession });

  // Organizations, projects, tasks, servers
  await call('put /api/v1/orgs', '/orgs', { body: { name: 'acme' } });
  await call('get /api/v1/orgs', '/orgs');
  await call('get /api/v1/orgs/:org', '/orgs/acme');
  await call('patch /api/v1/orgs/:org', '/orgs/acme', { body: { description: 'tools' } });
  await call('post /api/v1/orgs/:org/users', '/orgs/acme/users', { body: { user: 'bob', role: 'Write' } });
  await call('patch /api/v1/orgs/:org/users', '/orgs/acme/users', { body: { user: 'bob', role: 'Admin' } });
  await call('delete /api/v1/orgs/:org/users', '/orgs/acme/users', { body: { user: 'bob' } });
  await call('get /api/v1/orgs/:org/users', '/orgs/acme/users');
  await call('get /api/v1/orgs/:org/ssh', '/orgs/acme/ssh');
  await call('post /api/v1/orgs/:org/ssh', '/orgs/acme/ssh');
  await call('put /api/v1/projects/:org', '/projects/acme', { body: { name: 'web', repository: 'file:///nonexistent' } });
  await call('get /api/v1/projects/:org', '/projects/acme');
  await call('get /api/v1/projects/:org/:project', '/projects/acme/web');
  await call('patch /api/v1/projects/:org/:project', '/projects/acme/web', { body: { description: 'the site' } });
  await call('delete /api/v1/projects/:org/:project/active', '/projects/acme/web/active');
  await call('post /api/v1/projects/:org/:project/active', '/projects/acme/web/active');
  await call('get /api/v1/projects/:org/:project/details', '/projects/acme/web/details');
  await call('get /api/v1/projects/:org/:project/evaluations', '/projects/acme/web/evaluations');
  await call('get /api/v1/projects/:org/:project/entry-points', '/projects/acme/web/entry-points');
  await call('get /api/v1/projects/:org/:project/metrics', '/projects/acme/web/metrics');
  const [project] = await kiln.sql<{ id: string }[]>`select id from projects where name = 'web'`;
  const p = project!.id;
  await call('put /api/v1/tasks/:project', `/tasks/${p}`, { body: { name: 'nightly' } });
  await call('get /api/v1/tasks/:project', `/tasks/${p}`);
  await call('get /api/v1/tasks/:project/:task', `/tasks/${p}/default`);
  await call('post /api/v1/tasks/:project/:task/star', `/tasks/${p}/default/star`);
  await call('delete /api/v1/tasks/:project/:task/star', `/tasks/${p}/default/star`);
  await call('delete /api/v1/tasks/:project/:task', `/tasks/${p}/nightly`);
  await call('get /api/v1/tasks/:project/:task/entry-points', `/tasks/${p}/default/entry-points`);
  await call('put /api/v1/servers/:org', '/servers/acme', { body: { name: 'big', host: '127.0.0.1' } });
  await call('get /api/v1/servers/:org', '/servers/acme');
  await call('get /api/v1/servers/:org/:server', '/servers/acme/big');
  await call('patch /api/v1/servers/:org/:server', '/servers/acme/big', { body: { max_jobs: 4 } });
  await call('delete /api/v1/servers/:org/:server/active', '/servers/acme/big/active');
  await call('post /api/v1/servers/:org/:server/active', '/servers/acme/big/active');
  await call('delete /api/v1/servers/:org/:server', '/servers/acme/big');
  const worker = await call<{ id: string }>('post /api/v1/projects/:project/workers', `/projects/${p}/workers`, { body: { name: 'box' } });
  await call('get /api/v1/projects/:project/workers', `/projects/${p}/workers`);
  await call('delete /api/v1/projects/:project/workers/:id', `/projects/${p}/workers/${worker.id}`);

  // Members and invitations
  await call('post /api/v1/projects/:project/users', `/projects/${p}/users`, { body: { user: 'bob', role: 'Write' } });
  const invited = await call<{ id: string }[]>('get /api/v1/projects/:project/invitations', `/projects/${p}/invitations`);
  await call('get /api/v1/user/invitations', '/user/invitations', { token: bob.token });
  await call('post /api/v1/invitations/:id/accept', `/invitations/${invited[0]!.id}/accept`, { token: bob.token });
  await call('get /api/v1/projects/:project/users', `/projects/${p}/users`);
  await call('patch /api/v1/projects/:project/users', `/projects/${p}/users`, { body: { user: 'bob', role: 'Admin' } });
  await call('delete /api/v1/projects/:project/users', `/projects/${p}/users`, { body: { user: 'bob' } });

  // Caches
  await call('put /api/v1/caches', '/caches', { body: { name: 'main', public: false } });
  await call('get /api/v1/caches', '/caches');
  await call('get /api/v1/caches/:cache', '/caches/main');
  await call('patch /api/v1/caches/:cache', '/caches/main', { body: { description: 'builds' } });
  await call('delete /api/v1/caches/:cache/active', '/caches/main/active');
  await call('post /api/v1/caches/:cache/active', '/caches/main/active');
  await call('get /api/v1/caches/:cache/key', '/caches/main/key');
  await call('get /api/v1/caches/:cache/keys', '/caches/main/keys');
  await call('post /api/v1/caches/:cache/users', '/caches/main/users', { body: { user: 'bob', role: 'Write' } });
  const cacheInvites = await call<{ id: string }[]>('get /api/v1/caches/:cache/invitations', '/caches/main/invitations');
  await call('post /api/v1/invitations/:id/decline', `/invitations/${cacheInvites[0]!.id}/decline`, { token: bob.token });
  await call('post /api/v1/caches/:cache/users', '/caches/main/users', { body: { user: 'bob', role: 'Write' } });
  const again = await kiln.api<{ id: string }[]>('GET', '/caches/main/invitations', { token: ada.token });
  await call('delete /api/v1/invitations/:id', `/invitations/${again.message[0]!.id}`);
  await call('get /api/v1/caches/:cache/users', '/caches/main/users');
  await call('put /api/v1/caches/:cache/upstreams', '/caches/main/upstreams', { body: { url: 'http://127.0.0.1:9/up', public_key: 'up:' + Buffer.alloc(32).toString('base64') } });
  const upstreams = await call<{ id: string }[]>('get /api/v1/caches/:cache/upstreams', '/caches/main/upstreams');
  await call('delete /api/v1/caches/:cache/upstreams/:id', `/caches/main/upstreams/${upstreams[0]!.id}`);
  await call('post /api/v1/projects/:project/subscribe/:cache', `/projects/${p}/subscribe/main`, { body: {} });
  await call('get /api/v1/projects/:project/subscribe', `/projects/${p}/subscribe`);
  await call('get /api/v1/caches/:cache/subscriptions', '/caches/main/subscriptions');
  await call('get /api/v1/caches/:cache/subscription-requests', '/caches/main/subscription-requests');
  await call('delete /api/v1/projects/:project/subscribe/:cache', `/projects/${p}/subscribe/main`);
  await call('post /api/v1/orgs/:org/subscribe/:cache', '/orgs/acme/subscribe/main', { body: { mode: 1 } });
  await call('get /api/v1/orgs/:org/subscribe', '/orgs/acme/subscribe');
  await call('delete /api/v1/orgs/:org/subscribe/:cache', '/orgs/acme/subscribe/main');

  // NARs: a real store path, staged in chunks, then uploaded whole
  const fixture = buildFixturePaths();
  const storePath = fixture.file;
  const hash = storePath.slice('/nix/store/'.length, '/nix/store/'.length + 32);
  const chunk = await fetch(`${kiln.url}/api/v1/caches/main/nars/${hash}/chunk?offset=0`, { method: 'PUT', headers: { authorization: `Bearer ${ada.token}` }, body: new Uint8Array(100) });
  const chunkAnswer = (await chunk.json()) as { message: unknown };
  t.ok(routeSchemas['put /api/v1/caches/:cache/nars/:hash/chunk']!.response!.safeParse(chunkAnswer.message).success, 'put …/chunk answers its declared type');
  checked.add('put /api/v1/caches/:cache/nars/:hash/chunk');
  await call('get /api/v1/caches/:cache/nars/:hash/upload', `/caches/main/nars/${hash}/upload`);
  await call('delete /api/v1/caches/:cache/nars/:hash/upload', `/caches/main/nars/${hash}/upload`);
  const uploaded = await uploadStorePath(kiln.url, ada.token, 'main', storePath);
  t.equal(uploaded.status, 200);
  t.ok(routeSchemas['post /api/v1/caches/:cache/nars/:hash/finalize']!.response!.safeParse(uploaded.body.message).success, 'post …/finalize answers its declared type');
  checked.add('post /api/v1/caches/:cache/nars/:hash/finalize');
  await call('get /api/v1/caches/:cache/nars', '/caches/main/nars');
  await call('get /api/v1/caches/:cache/nars/:hash', `/caches/main/nars/${hash}`);
  await call('get /api/v1/caches/:cache/stats', '/caches/main/stats');
  await call('get /api/v1/caches/:cache/metrics', '/caches/main/metrics');
  await call('get /api/v1/board/cache', '/board/cache');
  await call('put /api/v1/caches/:cache/pins/:hash', `/caches/main/pins/${hash}`, { body: {} });
  await call('get /api/v1/caches/:cache/pins', '/caches/main/pins');
  await call('delete /api/v1/caches/:cache/pins/:hash', `/caches/main/pins/${hash}`);
  await call('delete /api/v1/caches/:cache/nars/:hash', `/caches/main/nars/${hash}`);

  // What a superuser reads, and instance webhooks
  await kiln.sql`update users set superuser = true where id = ${ada.id}`;
  await call('get /api/v1/admin/users', '/admin/users');
  await call('get /api/v1/admin/sessions', '/admin/sessions');
  await call('get /api/v1/admin/actors', '/admin/actors');
  await call('get /api/v1/admin/gc', '/admin/gc');
  await call('get /api/v1/config', '/config');
  await call('get /api/v1/events/catalog', '/events/catalog');
  await call('get /api/v1/metrics/instance', '/metrics/instance');
  await call('get /api/v1/workers', '/workers');
  const gcRun = await call<{ id: string }>('post /api/v1/admin/gc', '/admin/gc', { body: {} });
  await call('get /api/v1/admin/gc/:id', `/admin/gc/${gcRun.id}`);
  await call('post /api/v1/caches/:cache/key/rotate', '/caches/main/key/rotate', { body: { overlap_hours: 0, force: true } });
  await call('post /api/v1/caches/:cache/users', '/caches/main/users', { body: { user: 'bob', role: 'View' } });
  await call('patch /api/v1/caches/:cache/users', '/caches/main/users', { body: { user: 'bob', role: 'Write' } });
  await call('delete /api/v1/caches/:cache/users', '/caches/main/users', { body: { user: 'bob' } });

  for (const base of [`/projects/${p}/webhooks`, '/caches/main/webhooks', '/admin/webhooks']) {
    const key = `/api/v1${base.replace(p, ':project').replace('/main/', '/:cache/')}`;
    const hook = await call<{ id: string }>(`post ${key}`, base, { body: { url: 'http://127.0.0.1:9/hook', events: ['*'] } });
    await call(`put ${key}`, base, { body: { url: 'http://127.0.0.1:9/other', events: ['*'] } });
    await call(`get ${key}`, base);
    await call(`get ${key}/:id`, `${base}/${hook.id}`);
    await call(`patch ${key}/:id`, `${base}/${hook.id}`, { body: { description: 'ci' } });
    await call(`post ${key}/:id/rotate-secret`, `${base}/${hook.id}/rotate-secret`);
    const delivery = await call<{ id: string }>(`post ${key}/:id/test`, `${base}/${hook.id}/test`);
    await call(`get ${key}/:id/deliveries`, `${base}/${hook.id}/deliveries`);
    await call(`get ${key}/:id/deliveries/:delivery`, `${base}/${hook.id}/deliveries/${delivery.id}`);
    // Only a finished delivery is redelivered: this one gave up (the receiver never answered).
    await kiln.sql`update event_deliveries set status = 'dead', finished_at = now(), next_attempt_at = null where id = ${delivery.id}`;
    await call(`post ${key}/:id/deliveries/:delivery/redeliver`, `${base}/${hook.id}/deliveries/${delivery.id}/redeliver`);
    await call(`delete ${key}/:id`, `${base}/${hook.id}`);
  }
  // Task actions (deliveries go to a closed port: they still exist)
  const actions = `/tasks/${p}/default/actions`;
  const action = await call<{ id: string }>('post /api/v1/tasks/:project/:task/actions', actions, { body: { kind: 'send_web_request', name: 'notify', url: 'http://127.0.0.1:9/a' } });
  await call('put /api/v1/tasks/:project/:task/actions', actions, { body: { kind: 'send_mail', name: 'mail', to: ['ops@example.test'] } });
  await call('get /api/v1/tasks/:project/:task/actions', actions);
  await call('get /api/v1/tasks/:project/:task/actions/:id', `${actions}/${action.id}`);
  await call('patch /api/v1/tasks/:project/:task/actions/:id', `${actions}/${action.id}`, { body: { active: false } });
  await call('post /api/v1/tasks/:project/:task/actions/:id/rotate-secret', `${actions}/${action.id}/rotate-secret`);
  await call('get /api/v1/tasks/:project/:task/actions/:id/deliveries', `${actions}/${action.id}/deliveries`);
  await call('delete /api/v1/tasks/:project/:task/actions/:id', `${actions}/${action.id}`);

  // Evaluations and builds, from rows
  const [task] = await kiln.sql<{ id: string }[]>`select id from tasks where project_id = ${p} and name = 'default'`;
  const commit = 'a'.repeat(40);
  const [evaluation] = await kiln.sql<{ id: string }[]>`
    insert into evaluations (task_id, repository, commit, wildcard, phase) values (${task!.id}, 'file:///nonexistent', ${commit}, '*', 'completed') returning id`;
  const [derivation] = await kiln.sql<{ id: string }[]>`
    insert into derivations (drv_path, name, system, outputs) values ('/nix/store/00000000000000000000000000000000-x.drv', 'x', 'x86_64-linux', ${kiln.sql.json({ out: '/nix/store/00000000000000000000000000000000-x' })}) returning id`;
  const [shared] = await kiln.sql<{ id: string }[]>`insert into derivation_builds (derivation_id, status, attempts) values (${derivation!.id}, 'completed', 1) returning id`;
  const [build] = await kiln.sql<{ id: string }[]>`
    insert into builds (evaluation_id, derivation_build_id, entry_point, attr) values (${evaluation!.id}, ${shared!.id}, true, 'packages.x86_64-linux.x') returning id`;
  const e = evaluation!.id;
  const b = build!.id;
  // an open_pr action with a run: the action view's last_run
  const openPr = await call<{ id: string }>('put /api/v1/tasks/:project/:task/actions', actions, { body: { kind: 'open_pr', name: 'bump', command: ['nix', 'flake', 'update'] } });
  await kiln.sql`insert into open_pr_runs (evaluation_id, task_action_id, status, attempts, next_attempt_at, error) values (${e}, ${openPr.id}, 'retrying', 1, now(), 'the Git host: 502')`;
  const openPrView = await call<{ last_run?: { status: string } | null }>('get /api/v1/tasks/:project/:task/actions/:id', `${actions}/${openPr.id}`);
  t.equal(openPrView.last_run?.status, 'retrying', 'the open_pr action shows its last run');
  await call('get /api/v1/tasks/:project/:task/actions', actions);
  await call('get /api/v1/evals/:id', `/evals/${e}`);
  await call('get /api/v1/evals/:id/builds', `/evals/${e}/builds`);
  await call('get /api/v1/evals/:id/builds/page', `/evals/${e}/builds/page`);
  await call('get /api/v1/builds/:id', `/builds/${b}`);
  await call('get /api/v1/builds/:id/dependencies', `/builds/${b}/dependencies`);
  await call('get /api/v1/builds/:id/downloads', `/builds/${b}/downloads`);
  await call('get /api/v1/builds/:id/graph', `/builds/${b}/graph`);
  await call('get /api/v1/builds/:build/closure', `/builds/${b}/closure`);
  await call('get /api/v1/builds/:build/runtime-closure', `/builds/${b}/runtime-closure`);
  await call('get /api/v1/evals/:evaluation/closure', `/evals/${e}/closure`);
  await call('get /api/v1/evals/:evaluation/runtime-closure', `/evals/${e}/runtime-closure`);
  await call('get /api/v1/commits/:id', `/commits/${commit}`);
  await call('get /api/v1/tasks/:project/:task/evaluations', `/tasks/${p}/default/evaluations?commit=${commit}&attr=packages.x86_64-linux.x`);
  await call('get /api/v1/builds/direct/recent', '/builds/direct/recent');

  // Removals last
  await call('delete /api/v1/caches/:cache', '/caches/main');
  await call('delete /api/v1/projects/:org/:project', '/projects/acme/web');
  await call('delete /api/v1/orgs/:org', '/orgs/acme');
  await call('delete /api/v1/user', '/user', { token: bob.token });
  await call('post /api/v1/auth/logout', '/auth/logout');

  const typed = Object.entries(routeSchemas).filter(([, s]) => s.response).map(([k]) => k);
  t.comment(`${checked.size} of ${typed.length} routes with a typed envelope checked live; not here: ${typed.filter((k) => !checked.has(k)).join(', ')}`);
  t.ok(checked.size >= 165, `most typed routes are checked live (${checked.size})`);
});
