import t from 'tap';
import { accessFixture } from '../../support/accessFixture.js';

const DAY = 86_400_000;

t.test('project invitations: every transition of the spec', async (t) => {
  const f = await accessFixture(t);
  const { invitations, organizations, projects, members } = f.services;
  const ada = await f.user('ada');
  const bob = await f.user('bob');
  const eve = await f.user('eve');
  await organizations.create(ada, { name: 'acme' });
  const web = await projects.create(ada, 'acme', { name: 'web', repository: 'file:///x' });

  t.test('none → pending: 7 days, grants nothing', async (t) => {
    t.equal(await invitations.inviteToProject(ada, 'web', { user: 'bob', role: 'Write' }), 'Invitation sent to bob');
    const mine = await invitations.listMine(bob);
    t.equal(mine.length, 1);
    t.match(mine[0], { project: 'acme/web', cache: null, user: 'bob', role: 'Write', inviter: 'ada' });
    t.equal(mine[0]!.expires_at.getTime() - mine[0]!.created_at.getTime(), 7 * DAY);
    await t.rejects(projects.get(bob, 'acme', 'web'), { name: 'ApiError', status: 404 }, 'no access while pending');
    t.same((await invitations.listProject(ada, 'web')).map((i) => i.user), ['bob']);
  });

  t.test('pending → pending: a second invitation is 409', async (t) => {
    await t.rejects(invitations.inviteToProject(ada, 'web', { user: 'bob', role: 'View' }), { name: 'ApiError', status: 409, code: 'invitation_exists' });
  });

  t.test('accept only as the invited account, with a session', async (t) => {
    const [inv] = await invitations.listMine(bob);
    await t.rejects(invitations.accept(eve, inv!.id), { name: 'ApiError', status: 403, code: 'not_invited' });
    await t.rejects(invitations.accept(f.key(bob, ['viewProject']), inv!.id), { name: 'ApiError', status: 403, code: 'session_required' });
    await t.rejects(invitations.decline(eve, inv!.id), { name: 'ApiError', status: 403, code: 'not_invited' });
    await t.rejects(invitations.accept(bob, '00000000-0000-4000-8000-000000000000'), { name: 'ApiError', status: 404 });
    await t.rejects(invitations.accept(bob, 'not-a-uuid'), { name: 'ApiError', status: 404 });
  });

  t.test('pending → member: accept creates the membership with the offered role', async (t) => {
    const [inv] = await invitations.listMine(bob);
    t.match(await invitations.accept(bob, inv!.id), /accepted/);
    t.match(await projects.get(bob, 'acme', 'web'), { role: 'Write' });
    t.same(await invitations.listMine(bob), []);
    await t.rejects(invitations.inviteToProject(ada, 'web', { user: 'bob', role: 'Admin' }), { name: 'ApiError', status: 409, code: 'already_member' });
  });

  t.test('pending → deleted: decline', async (t) => {
    await invitations.inviteToProject(ada, 'web', { user: 'eve', role: 'View' });
    const [inv] = await invitations.listMine(eve);
    t.equal(await invitations.decline(eve, inv!.id), 'Invitation declined');
    t.same(await invitations.listMine(eve), []);
    await t.rejects(projects.get(eve, 'acme', 'web'), { name: 'ApiError', status: 404 });
  });

  t.test('pending → deleted: revoke needs manageMembers; outsiders learn nothing', async (t) => {
    await invitations.inviteToProject(ada, 'web', { user: 'eve', role: 'View' });
    const [inv] = await invitations.listMine(eve);
    await t.rejects(invitations.revoke(bob, inv!.id), { name: 'ApiError', status: 403, message: /manageMembers is required/ }, 'a Write member sees the project but may not revoke');
    const stranger = await f.user('mallory');
    await t.rejects(invitations.revoke(stranger, inv!.id), { name: 'ApiError', status: 404, message: `no invitation ${inv!.id}` });
    t.equal(await invitations.revoke(ada, inv!.id), 'Invitation revoked');
    t.same(await invitations.listMine(eve), []);
  });

  t.test('pending → discarded: accepting after expiry is refused (410) and the invitation is gone', async (t) => {
    await invitations.inviteToProject(ada, 'web', { user: 'eve', role: 'Admin' });
    const [inv] = await invitations.listMine(eve);
    f.clock.advance(7 * DAY - 1000);
    t.equal((await invitations.listMine(eve)).length, 1, 'still open a second before expiry');
    f.clock.advance(1000);
    t.same(await invitations.listMine(eve), [], 'an expired invitation is not listed');
    await t.rejects(invitations.accept(eve, inv!.id), { name: 'ApiError', status: 410, code: 'invitation_expired' });
    t.equal((await f.sql`select 1 from invitations where id = ${inv!.id}`).length, 0, 'discarded');
    await t.rejects(projects.get(eve, 'acme', 'web'), { name: 'ApiError', status: 404 });
  });

  t.test('an expired invitation makes room for a new one', async (t) => {
    await invitations.inviteToProject(ada, 'web', { user: 'eve', role: 'View' });
    f.clock.advance(8 * DAY);
    t.equal(await invitations.inviteToProject(ada, 'web', { user: 'eve', role: 'View' }), 'Invitation sent to eve');
    t.equal((await f.sql`select 1 from invitations`).length, 1);
  });

  t.test('a superuser holding manageMembers adds directly; without a role a superuser is a stranger', async (t) => {
    const root = await f.user('root', { superuser: true });
    await t.rejects(invitations.inviteToProject(root, 'web', { user: 'mallory', role: 'View' }), { name: 'ApiError', status: 404 }, 'not an implicit member');
    await f.sql`insert into project_members (project_id, user_id, role) values (${web.id}, ${root.userId}, 'Admin')`;
    t.equal(await invitations.inviteToProject(root, 'web', { user: 'mallory', role: 'View' }), 'mallory added to project "acme/web" as View');
    t.same((await members.list(ada, 'project', 'web')).map((m) => [m.user, m.role]), [['bob', 'Write'], ['mallory', 'View'], ['root', 'Admin']]);
  });

  t.test('member list: change a role, remove, leave', async (t) => {
    await t.rejects(members.update(bob, 'project', 'web', { user: 'mallory', role: 'Admin' }), { name: 'ApiError', status: 403 });
    await members.update(ada, 'project', 'web', { user: 'mallory', role: 'Write' });
    t.same(await members.remove(bob, 'project', 'web', { user: 'bob' }), [], 'bob leaves');
    await members.remove(ada, 'project', 'web', { user: 'mallory' });
    t.same((await members.list(ada, 'project', 'web')).map((m) => m.user), ['root']);
    await t.rejects(members.remove(ada, 'project', 'web', { user: 'mallory' }), { name: 'ApiError', status: 404, code: 'not_member' });
  });

  t.test('inviting needs manageMembers', async (t) => {
    await f.sql`insert into project_members (project_id, user_id, role) values (${web.id}, ${bob.userId}, 'Write')`;
    await t.rejects(invitations.inviteToProject(bob, 'web', { user: 'eve', role: 'View' }), { name: 'ApiError', status: 403, message: /manageMembers/ });
    await t.rejects(invitations.inviteToProject(ada, 'web', { user: 'nobody', role: 'View' }), { name: 'ApiError', status: 404, code: 'user_not_found' });
  });
});

t.test('cache invitations and state-managed targets', async (t) => {
  const f = await accessFixture(t);
  const { invitations, members } = f.services;
  const ada = await f.user('ada');
  const bob = await f.user('bob');
  await f.cache('main', { owner: ada });
  await f.cache('declared', { owner: ada });
  await f.sql`update caches set state_managed = true where name = 'declared'`;

  t.equal(await invitations.inviteToCache(ada, 'main', { user: 'bob', role: 'Write' }), 'Invitation sent to bob');
  await t.rejects(invitations.inviteToCache(ada, 'main', { user: 'bob', role: 'Write' }), { name: 'ApiError', status: 409, code: 'invitation_exists' });
  await t.rejects(invitations.inviteToCache(bob, 'main', { user: 'ada', role: 'Write' }), { name: 'ApiError', status: 404 }, 'a private cache is hidden from non-members');
  t.match(await invitations.listCache(ada, 'main'), [{ cache: 'main', project: null, user: 'bob' }]);
  const [inv] = await invitations.listMine(bob);
  await invitations.accept(bob, inv!.id);
  t.match(await members.list(bob, 'cache', 'main'), [{ user: 'bob', role: 'Write' }]);
  await t.rejects(invitations.inviteToCache(bob, 'main', { user: 'ada', role: 'View' }), { name: 'ApiError', status: 403, message: /manageCacheMembers/ });

  await t.rejects(invitations.inviteToCache(ada, 'declared', { user: 'bob', role: 'View' }), { name: 'ApiError', status: 403, code: 'state_managed' });
  await t.rejects(members.update(ada, 'cache', 'declared', { user: 'bob', role: 'View' }), { name: 'ApiError', status: 403, code: 'state_managed' });
  await t.rejects(members.remove(ada, 'cache', 'declared', { user: 'bob' }), { name: 'ApiError', status: 403, code: 'state_managed' });
});
