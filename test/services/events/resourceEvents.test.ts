import t from 'tap';
import { signUp } from '../../support/accounts.js';
import { eventually, startEventKiln, startReceiver } from '../../support/events.js';
import { names, outboxReader } from '../../support/outboxEvents.js';

// Organizations, projects, tasks and members emit their catalog events in the transaction of the
// change (docs/events.md): written to the outbox with the change, delivered to the webhooks of
// their scope, and nothing at all when the change fails.

t.test('organizations, projects, tasks and members write their events with the change', async (t) => {
  const kiln = await startEventKiln(t);
  const receiver = await startReceiver(t);
  const ada = await signUp(kiln, 'ada');
  await signUp(kiln, 'bob');
  const next = outboxReader(kiln.sql);
  await next();
  const api = async (method: 'PUT' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown) => {
    const r = await kiln.api(method, path, { token: ada.token, ...(body === undefined ? {} : { body }) });
    if (r.status !== 200) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.message)}`);
    return next();
  };

  const org = await api('PUT', '/orgs', { name: 'acme' });
  t.same(names(org), ['organization.create', 'organization.member.create']);
  t.match(org.find((e) => e.event === 'organization.create'), { content: { organization: 'acme', organization_id: String }, scope: { organization_id: String, project_id: null } });
  t.match(org.find((e) => e.event === 'organization.member.create'), { content: { organization: 'acme', user: 'ada', role: 'Admin' } });
  t.match(await api('PATCH', '/orgs/acme', { description: 'widgets' }), [{ event: 'organization.update', content: { changes: ['description'] } }]);
  t.match(await api('POST', '/orgs/acme/ssh'), [{ event: 'organization.ssh_key.rotate', content: { organization: 'acme' } }]);
  t.match(await api('POST', '/orgs/acme/users', { user: 'bob', role: 'View' }), [{ event: 'organization.member.create', content: { user: 'bob', role: 'View' } }]);
  t.match(await api('PATCH', '/orgs/acme/users', { user: 'bob', role: 'Write' }), [{ event: 'organization.member.update', content: { user: 'bob', role: 'Write' } }]);
  t.match(await api('DELETE', '/orgs/acme/users', { user: 'bob' }), [{ event: 'organization.member.delete', content: { user: 'bob' } }]);

  const project = await api('PUT', '/projects/acme', { name: 'web', repository: 'https://git.example/web.git' });
  t.same(names(project), ['project.create', 'task.create']);
  const created = project.find((e) => e.event === 'project.create')!;
  t.match(created, { content: { project: 'acme/web', project_id: String, repository: 'https://git.example/web.git', active: true } });
  const projectId = created.content['project_id'] as string;
  t.equal(created.scope.project_id, projectId, 'scoped to the project: its webhooks receive it');
  t.match(project.find((e) => e.event === 'task.create'), { content: { project: 'acme/web', task: 'default' }, scope: { project_id: projectId, task_id: String } });

  // From here on a project webhook and an instance webhook receive what they match.
  const projectHook = await kiln.api<{ id: string }>('PUT', '/projects/web/webhooks', { token: ada.token, body: { url: `${receiver.url}?project`, events: ['task.*', 'project.*'] } });
  t.equal(projectHook.status, 200);
  await kiln.api('PUT', '/admin/webhooks', { token: ada.token, body: { url: `${receiver.url}?instance`, events: ['project.*', 'organization.*'] } });

  t.match(await api('PATCH', '/projects/acme/web', { description: 'the site', wildcard: 'packages.*' }), [{ event: 'project.update', content: { changes: ['description', 'wildcard'] } }]);
  t.match(await api('DELETE', '/projects/acme/web/active'), [{ event: 'project.update', content: { active: false, changes: ['active'] } }]);
  t.match(await api('PUT', '/tasks/web', { name: 'nightly' }), [{ event: 'task.create', content: { task: 'nightly', task_id: String } }]);
  t.match(await api('POST', '/tasks/web/nightly/star'), [{ event: 'task.star', content: { task: 'nightly', user: 'ada', stars: 1 } }]);
  t.same(await api('POST', '/tasks/web/nightly/star'), [], 'starring twice changes nothing and emits nothing');
  t.match(await api('DELETE', '/tasks/web/nightly/star'), [{ event: 'task.unstar', content: { stars: 0 } }]);
  t.match(await api('DELETE', '/tasks/web/nightly'), [{ event: 'task.delete', content: { task: 'nightly' } }]);
  t.match(await api('POST', '/projects/web/workers', { name: 'builder' }), [{ event: 'project.worker.register', content: { project: 'acme/web', name: 'builder' } }]);

  // project.* 3 + task.* 4 to the project webhook; project.* 3 to the instance webhook.
  await receiver.waitFor(10);
  const received = (query: string) => receiver.requests.filter((r) => r.url.endsWith(query)).map((r) => r.headers['x-service-event']);
  t.same(received('?project').sort(), ['project.update', 'project.update', 'project.worker.register', 'task.create', 'task.delete', 'task.star', 'task.unstar'].sort());
  t.same(received('?instance').sort(), ['project.update', 'project.update', 'project.worker.register'].sort());

  t.match(await api('DELETE', '/projects/acme/web'), [{ event: 'project.delete', content: { project: 'acme/web', project_id: projectId } }]);
  await eventually('project.delete at the instance webhook', async () => (received('?instance').includes('project.delete') ? true : undefined));
  t.notOk(received('?project').includes('project.delete'), 'the project\'s own webhooks went with it');
  t.match(await api('DELETE', '/orgs/acme'), [{ event: 'organization.delete', content: { organization: 'acme' } }]);
});

t.test('a change that fails emits nothing', async (t) => {
  const kiln = await startEventKiln(t);
  const ada = await signUp(kiln, 'ada');
  await signUp(kiln, 'bob');
  const next = outboxReader(kiln.sql);
  const ok = async (method: 'PUT' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown) => {
    const r = await kiln.api(method, path, { token: ada.token, ...(body === undefined ? {} : { body }) });
    t.equal(r.status, 200, `${method} ${path}`);
  };
  await ok('PUT', '/orgs', { name: 'acme' });
  await ok('PUT', '/projects/acme', { name: 'web', repository: 'https://git.example/web.git' });
  await next();
  const refused = async (method: 'PUT' | 'POST' | 'PATCH' | 'DELETE', path: string, body: unknown, code: string) => {
    const r = await kiln.api(method, path, { token: ada.token, body });
    t.equal(r.code, code, `${method} ${path}: ${code}`);
    t.same(await next(), [], 'and nothing was written');
  };
  await refused('PUT', '/orgs', { name: 'acme' }, 'organization_exists');
  await refused('PUT', '/projects/acme', { name: 'web', repository: 'https://git.example/web.git' }, 'project_exists');
  await refused('PUT', '/tasks/web', { name: 'default' }, 'task_exists');
  await refused('DELETE', '/orgs/acme/users', { user: 'ada' }, 'last_admin');
  await refused('PATCH', '/orgs/acme/users', { user: 'ada', role: 'View' }, 'last_admin');
  await refused('POST', '/orgs/acme/users', { user: 'ada', role: 'View' }, 'already_member');
  await refused('DELETE', '/tasks/web/default', undefined, 'default_task');
});
