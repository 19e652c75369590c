import t from 'tap';
import { accessFixture } from '../../support/accessFixture.js';
import { names, outboxReader } from '../../support/outboxEvents.js';

// Invitations, members and subscriptions emit their events in the transaction of the change:
// project.* to the project, cache.* to the cache, organization.* to the organization.

t.test('invitations and members of projects and caches', async (t) => {
  const f = await accessFixture(t);
  const { organizations, projects, invitations, members } = f.services;
  const next = outboxReader(f.sql);
  const ada = await f.user('ada');
  const bob = await f.user('bob');
  const root = await f.user('root', { superuser: true });
  await organizations.create(ada, { name: 'acme' });
  const web = await projects.create(ada, 'acme', { name: 'web', repository: 'file:///x' });
  const cacheId = await f.cache('main', { owner: ada });
  await next();

  t.equal(await invitations.inviteToProject(ada, 'web', { user: 'bob', role: 'Write' }), 'Invitation sent to bob');
  t.match(await next(), [{ event: 'project.invitation.create', content: { project: 'acme/web', user: 'bob', role: 'Write', inviter: 'ada' }, scope: { project_id: web.id } }]);
  await t.rejects(invitations.inviteToProject(ada, 'web', { user: 'bob', role: 'View' }), { code: 'invitation_exists' });
  t.same(await next(), [], 'a refused invitation emits nothing');
  const [open] = await invitations.listMine(bob);
  await invitations.accept(bob, open!.id);
  t.match(await next(), [{ event: 'project.member.create', content: { project: 'acme/web', user: 'bob', role: 'Write' }, scope: { project_id: web.id } }]);
  await members.update(ada, 'project', 'web', { user: 'bob', role: 'View' });
  t.match(await next(), [{ event: 'project.member.update', content: { user: 'bob', role: 'View' } }]);
  await members.remove(bob, 'project', 'web', { user: 'bob' });
  t.match(await next(), [{ event: 'project.member.delete', content: { project: 'acme/web', user: 'bob' } }], 'leaving is a delete too');

  await invitations.inviteToCache(ada, 'main', { user: 'bob', role: 'View' });
  t.match(await next(), [{ event: 'cache.invitation.create', content: { cache: 'main', user: 'bob', role: 'View' }, scope: { cache_id: cacheId, project_id: null } }]);
  const [toCache] = await invitations.listMine(bob);
  await invitations.accept(bob, toCache!.id);
  t.match(await next(), [{ event: 'cache.member.create', content: { cache: 'main', user: 'bob', role: 'View' }, scope: { cache_id: cacheId } }]);
  await t.rejects(members.update(ada, 'cache', 'main', { user: 'root', role: 'View' }), { code: 'not_member' });
  t.same(await next(), [], 'a refused role change emits nothing');

  // A superuser who may manage members adds them directly: a member event, no invitation.
  await f.sql`insert into cache_members (cache_id, user_id, role) select ${cacheId}, id, 'Admin' from users where username = 'root'`;
  await f.sql`insert into users (username) values ('cy')`;
  t.match(await invitations.inviteToCache(root, 'main', { user: 'cy', role: 'Write' }), /added/);
  t.match(await next(), [{ event: 'cache.member.create', content: { user: 'cy', role: 'Write' } }]);
  t.ok(f.published.some((e) => e.event === 'cache.member.create'), 'published on the bus after the commit');
});

t.test('subscriptions: requests, approvals, denials and unsubscribing', async (t) => {
  const f = await accessFixture(t);
  const { organizations, projects, subscriptions } = f.services;
  const next = outboxReader(f.sql);
  const ada = await f.user('ada');
  const cat = await f.user('cat');
  await organizations.create(ada, { name: 'acme' });
  const web = await projects.create(ada, 'acme', { name: 'web', repository: 'file:///x' });
  const shared = await f.cache('shared', { owner: cat, public: true });
  const own = await f.cache('own', { owner: ada });
  await next();

  t.equal(await subscriptions.subscribeProject(ada, 'web', 'shared', 1), 'Subscription requested');
  const requested = await next();
  t.same(names(requested), ['cache.subscription.request', 'project.subscription.request']);
  t.match(requested.find((e) => e.event === 'project.subscription.request'), { content: { project: 'acme/web', cache: 'shared', mode: 1 }, scope: { project_id: web.id, cache_id: null } });
  t.match(requested.find((e) => e.event === 'cache.subscription.request'), { content: { cache: 'shared', project: 'acme/web', mode: 1 }, scope: { cache_id: shared, project_id: null } });

  const [request] = await subscriptions.listRequests(cat, 'shared');
  await subscriptions.approve(cat, 'shared', request!.id);
  const approved = await next();
  t.same(names(approved), ['cache.subscription.approve', 'project.subscription.create']);
  t.match(approved.find((e) => e.event === 'project.subscription.create'), { content: { project: 'acme/web', cache: 'shared', mode: 1 } });

  t.equal(await subscriptions.subscribeProject(ada, 'web', 'own', 0), 'Subscribed');
  t.match(await next(), [{ event: 'project.subscription.create', content: { cache: 'own', mode: 0 }, scope: { project_id: web.id } }], 'a direct subscription: no cache-side event');
  t.equal(await subscriptions.unsubscribeProject(ada, 'web', 'own'), 'Unsubscribed');
  t.match(await next(), [{ event: 'project.subscription.delete', content: { cache: 'own' } }]);
  await t.rejects(subscriptions.unsubscribeProject(ada, 'web', 'own'), { code: 'not_subscribed' });
  t.same(await next(), [], 'nothing to end: nothing emitted');

  await subscriptions.subscribeOrganization(ada, 'acme', 'shared', 2);
  t.same(names(await next()), ['cache.subscription.request', 'organization.subscription.request']);
  const [orgRequest] = await subscriptions.listRequests(cat, 'shared');
  await subscriptions.deny(cat, 'shared', orgRequest!.id);
  t.match(await next(), [{ event: 'cache.subscription.deny', content: { cache: 'shared', organization: 'acme', mode: 2 }, scope: { cache_id: shared } }]);
  await subscriptions.subscribeOrganization(ada, 'acme', 'own', 0);
  t.match(await next(), [{ event: 'organization.subscription.create', content: { organization: 'acme', cache: 'own' }, scope: { project_id: null } }]);
  t.ok(own);
});
