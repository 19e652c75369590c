// The response types of the OpenAPI document (http/openApiRoutes.ts `response`) are what the
// routes answer: each route given here is called on a real server with real rows, and its
// envelope's message is parsed with the declared schema (strict objects: a field the server adds
// or drops fails). A route whose declared type drifted from its answer goes red here.
import t from 'tap';
import { startTestKiln } from '../../../support/kiln.js';
import { signUp } from '../../../support/accounts.js';
import { routeSchemas } from '../../../../http/openApiRoutes.js';

t.test('declared response types match live answers', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } });
  await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'web', repository: 'file:///nonexistent' } });
  const [project] = await kiln.sql<{ id: string }[]>`select id from projects where name = 'web'`;
  const [task] = await kiln.sql<{ id: string }[]>`select id from tasks where project_id = ${project!.id} and name = 'default'`;
  const [evaluation] = await kiln.sql<{ id: string }[]>`
    insert into evaluations (task_id, repository, commit, wildcard, phase) values (${task!.id}, 'file:///nonexistent', ${'a'.repeat(40)}, '*', 'completed') returning id`;
  const [derivation] = await kiln.sql<{ id: string }[]>`
    insert into derivations (drv_path, name, system, outputs) values ('/nix/store/00000000000000000000000000000000-x.drv', 'x', 'x86_64-linux', ${kiln.sql.json({ out: '/nix/store/00000000000000000000000000000000-x' })}) returning id`;
  const [shared] = await kiln.sql<{ id: string }[]>`insert into derivation_builds (derivation_id, status, attempts) values (${derivation!.id}, 'completed', 1) returning id`;
  const [build] = await kiln.sql<{ id: string }[]>`
    insert into builds (evaluation_id, derivation_build_id, entry_point, attr) values (${evaluation!.id}, ${shared!.id}, true, 'packages.x86_64-linux.x') returning id`;
  const e = evaluation!.id;
  const b = build!.id;
  // an open_pr action with a run: the action view's last_run
  const openPr = await kiln.api<{ id: string }>('PUT', `/tasks/${project!.id}/default/actions`, { token: ada.token, body: { kind: 'open_pr', name: 'bump', command: ['nix', 'flake', 'update'] } });
  await kiln.sql`insert into open_pr_runs (evaluation_id, task_action_id, status, attempts, next_attempt_at, error) values (${e}, ${openPr.message.id}, 'retrying', 1, now(), 'the Git host: 502')`;
  const calls: [string, string, unknown?][] = [
    ['get /api/v1/orgs', '/orgs'],
    ['get /api/v1/orgs/:org', '/orgs/acme'],
    ['get /api/v1/orgs/:org/users', '/orgs/acme/users'],
    ['get /api/v1/projects/:org', '/projects/acme'],
    ['get /api/v1/projects/:org/:project', '/projects/acme/web'],
    ['get /api/v1/projects/:org/:project/details', '/projects/acme/web/details'],
    ['get /api/v1/projects/:org/:project/evaluations', '/projects/acme/web/evaluations'],
    ['get /api/v1/projects/:org/:project/entry-points', '/projects/acme/web/entry-points'],
    ['get /api/v1/projects/:project/subscribe', `/projects/${project!.id}/subscribe`],
    ['get /api/v1/projects/:project/users', `/projects/${project!.id}/users`],
    ['get /api/v1/tasks/:project', `/tasks/${project!.id}`],
    ['get /api/v1/tasks/:project/:task', `/tasks/${project!.id}/default`],
    ['get /api/v1/tasks/:project/:task/entry-points', `/tasks/${project!.id}/default/entry-points`],
    ['get /api/v1/tasks/:project/:task/actions', `/tasks/${project!.id}/default/actions`],
    ['get /api/v1/tasks/:project/:task/actions/:id', `/tasks/${project!.id}/default/actions/${openPr.message.id}`],
    ['get /api/v1/evals/:id', `/evals/${e}`],
    ['get /api/v1/evals/:id/builds', `/evals/${e}/builds`],
    ['get /api/v1/evals/:id/builds/page', `/evals/${e}/builds/page`],
    ['get /api/v1/builds/:id', `/builds/${b}`],
    ['get /api/v1/builds/:id/dependencies', `/builds/${b}/dependencies`],
    ['get /api/v1/builds/:id/downloads', `/builds/${b}/downloads`],
    ['get /api/v1/builds/:build/closure', `/builds/${b}/closure`],
    ['get /api/v1/evals/:evaluation/closure', `/evals/${e}/closure`],
    ['get /api/v1/user/keys', '/user/keys'],
    ['post /api/v1/tasks/:project/:task/star', `/tasks/${project!.id}/default/star`],
  ];
  for (const [key, path] of calls) {
    const schema = routeSchemas[key]?.response;
    t.ok(schema, `${key} declares its response`);
    if (!schema) continue;
    const [method] = key.split(' ');
    const res = await kiln.api(method!.toUpperCase(), path, { token: ada.token });
    t.equal(res.status, 200, `${key}: ${JSON.stringify(res.message).slice(0, 300)}`);
    const parsed = schema.safeParse(res.message);
    t.ok(parsed.success, `${key} answers its declared type${parsed.success ? '' : `: ${parsed.error.message.slice(0, 1500)}`}`);
  }
});
