import t from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestKiln } from '../../../support/kiln.js';
import { signUp } from '../../../support/accounts.js';

/** A real git repository on disk with one commit on main, reachable as file://. */
function gitRepository(): { url: string; head: string } {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-repo-'));
  const git = (...args: string[]) => execFileSync('git', ['-C', dir, ...args], { env: { ...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t' } }).toString().trim();
  git('init', '-q', '-b', 'main');
  writeFileSync(join(dir, 'flake.nix'), '{ outputs = _: { }; }\n');
  git('add', 'flake.nix');
  git('commit', '-q', '-m', 'init');
  git('tag', 'v1');
  return { url: `file://${dir}`, head: git('rev-parse', 'HEAD') };
}

t.test('projects', async (t) => {
  const kiln = await startTestKiln(t);
  await signUp(kiln, 'root');
  const ada = await signUp(kiln, 'ada');
  const bob = await signUp(kiln, 'bob');
  const eve = await signUp(kiln, 'eve');
  await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } });
  await kiln.api('POST', '/orgs/acme/users', { token: ada.token, body: { user: 'bob', role: 'View' } });
  const repo = gitRepository();

  const created = await kiln.api<{ id: string; name: string; organization: string; active: boolean; role: string }>('PUT', '/projects/acme', {
    token: ada.token, body: { name: 'web', repository: repo.url },
  });
  t.equal(created.status, 200, JSON.stringify(created.message));
  t.match(created.message, { name: 'web', organization: 'acme', active: true, role: 'Admin' });
  t.equal((await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'web', repository: repo.url } })).code, 'project_exists');
  t.equal((await kiln.api('PUT', '/projects/acme', { token: bob.token, body: { name: 'api', repository: repo.url } })).status, 403, 'View cannot create');
  t.equal((await kiln.api('PUT', '/projects/acme', { token: eve.token, body: { name: 'api', repository: repo.url } })).status, 404, 'a stranger learns nothing');

  t.test('every project has the task default', async (t) => {
    const tasks = await kiln.api<{ name: string }[]>('GET', `/tasks/${created.message.id}`, { token: bob.token });
    t.same(tasks.message.map((x) => x.name), ['default']);
  });

  t.test('read: list, get, details; a stranger gets 404', async (t) => {
    t.same((await kiln.api<{ name: string }[]>('GET', '/projects/acme', { token: bob.token })).message.map((p) => p.name), ['web']);
    t.equal((await kiln.api('GET', '/projects/acme', { token: eve.token })).status, 404);
    t.equal((await kiln.api('GET', '/projects/acme/web', { token: eve.token })).status, 404);
    const details = await kiln.api<{ project: { name: string }; tasks: { name: string }[]; subscriptions: { subscriptions: unknown[] }; members: unknown[] }>(
      'GET', '/projects/acme/web/details', { token: bob.token });
    t.equal(details.status, 200);
    t.equal(details.message.project.name, 'web');
    t.same(details.message.tasks.map((x) => x.name), ['default']);
    t.same(details.message.subscriptions.subscriptions, []);
    t.same(details.message.members, []);
  });

  t.test('update, active, and refusals for View', async (t) => {
    const patched = await kiln.api<{ description: string; default_branch: string | null; repository: string }>('PATCH', '/projects/acme/web', {
      token: ada.token, body: { description: 'the site', default_branch: 'main' },
    });
    t.equal(patched.message.description, 'the site');
    t.equal(patched.message.default_branch, 'main');
    t.equal(patched.message.repository, repo.url);
    const refused = await kiln.api('PATCH', '/projects/acme/web', { token: bob.token, body: { description: 'x' } });
    t.equal(refused.status, 403);
    t.match(refused.message, /manageProject is required on project "acme\/web"/);
    t.equal((await kiln.api<{ active: boolean }>('DELETE', '/projects/acme/web/active', { token: ada.token })).message.active, false);
    t.equal((await kiln.api<{ active: boolean }>('POST', '/projects/acme/web/active', { token: ada.token })).message.active, true);
    t.equal((await kiln.api('POST', '/projects/acme/web/active', { token: bob.token })).status, 403);
  });

  t.test('check-repository runs git ls-remote', async (t) => {
    const ok = await kiln.api<{ ok: boolean; refs: { name: string; commit: string }[] }>('POST', '/projects/acme/web/check-repository', { token: ada.token });
    t.equal(ok.message.ok, true);
    t.same(ok.message.refs.map((r) => r.name).sort(), ['refs/heads/main', 'refs/tags/v1']);
    t.equal(ok.message.refs.find((r) => r.name === 'refs/heads/main')?.commit, repo.head);
    await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'gone', repository: 'file:///nonexistent/repo' } });
    const bad = await kiln.api<{ ok: boolean; reason: string }>('POST', '/projects/acme/gone/check-repository', { token: ada.token });
    t.equal(bad.message.ok, false);
    t.equal(bad.message.reason, 'unreachable', 'git\'s own text is not passed on');
  });

  t.test('a single-segment project: UUID, or a name one organization uses', async (t) => {
    t.equal((await kiln.api('GET', '/tasks/web', { token: ada.token })).status, 200, 'unique name');
    t.equal((await kiln.api('GET', `/tasks/${created.message.id}`, { token: ada.token })).status, 200, 'UUID');
    await kiln.api('PUT', '/orgs', { token: eve.token, body: { name: 'evil' } });
    await kiln.api('PUT', '/projects/evil', { token: eve.token, body: { name: 'web', repository: repo.url } });
    t.equal((await kiln.api('GET', '/tasks/web', { token: ada.token })).status, 200, 'still resolves: ada sees only one "web"');
    t.equal((await kiln.api('GET', '/tasks/web', { token: eve.token })).status, 200, 'and eve sees only hers');
    await kiln.api('POST', '/orgs/evil/users', { token: eve.token, body: { user: 'ada', role: 'View' } });
    const ambiguous = await kiln.api('GET', '/tasks/web', { token: ada.token });
    t.equal(ambiguous.status, 404, 'two visible projects named "web": give the UUID');
    t.match(ambiguous.message, /UUID/);
  });

  t.test('reserved names and bad bodies', async (t) => {
    const cases: [unknown, RegExp][] = [
      [{ repository: repo.url }, /^name: /],
      [{ name: 'users', repository: repo.url }, /^name: is reserved/],
      [{ name: 'x' }, /^repository: /],
      [{ name: 'x', repository: '--upload-pack=touch /tmp/pwned' }, /^repository: must not start with "-"/],
      [{ name: 'x', repository: 'ext::sh -c touch% /tmp/pwned' }, /^repository: /],
      [{ name: 'x', repository: repo.url, wildcard: '' }, /^wildcard: /],
      [{ name: 'x', repository: repo.url, default_branch: 'a b' }, /^default_branch: /],
      [{ name: 'x', repository: 'r'.repeat(2001) }, /^repository: /],
    ];
    for (const [body, message] of cases) {
      const res = await kiln.api('PUT', '/projects/acme', { token: ada.token, body });
      t.equal(res.status, 400, JSON.stringify(body).slice(0, 80));
      t.match(res.message, message);
    }
    const patch = await kiln.api('PATCH', '/projects/acme/web', { token: ada.token, body: { active: false } });
    t.equal(patch.status, 400);
    t.match(patch.message, /active/);
    t.same((await kiln.sql<{ name: string }[]>`select name from projects order by name`).map((r) => r.name), ['gone', 'web', 'web']);
  });

  t.test('delete', async (t) => {
    t.equal((await kiln.api('DELETE', '/projects/acme/web', { token: bob.token })).status, 403);
    t.equal((await kiln.api('DELETE', '/projects/acme/web', { token: ada.token })).status, 200);
    t.equal((await kiln.api('GET', '/projects/acme/web', { token: ada.token })).status, 404);
  });
});

t.test('permissions.createProject', async (t) => {
  for (const [policy, expectUser, expectSuper] of [['none', 403, 403], ['superusers', 403, 200], ['everyone', 200, 200]] as const) {
    t.test(policy, async (t) => {
      const kiln = await startTestKiln(t, { 'permissions.createProject': policy });
      const root = await signUp(kiln, 'root');
      const ada = await signUp(kiln, 'ada');
      await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } });
      await kiln.api('POST', '/orgs/acme/users', { token: ada.token, body: { user: 'root', role: 'Admin' } });
      const byUser = await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'a', repository: 'file:///x' } });
      t.equal(byUser.status, expectUser);
      if (expectUser === 403) t.equal(byUser.code, 'creation_disabled');
      t.equal((await kiln.api('PUT', '/projects/acme', { token: root.token, body: { name: 'b', repository: 'file:///x' } })).status, expectSuper);
    });
  }
});
