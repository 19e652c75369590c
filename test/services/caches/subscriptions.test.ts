import t from 'tap';
import { accessFixture } from '../../support/accessFixture.js';

t.test('project subscriptions: every transition of the spec', async (t) => {
  const f = await accessFixture(t);
  const { subscriptions, organizations, projects } = f.services;
  const ada = await f.user('ada'); // project admin
  const cat = await f.user('cat'); // cache owner
  const bob = await f.user('bob'); // Write on the project
  await organizations.create(ada, { name: 'acme' });
  const web = await projects.create(ada, 'acme', { name: 'web', repository: 'file:///x' });
  await f.sql`insert into project_members (project_id, user_id, role) values (${web.id}, ${bob.userId}, 'Write')`;
  const shared = await f.cache('shared', { owner: cat, public: true });
  await f.cache('secret', { owner: cat });

  t.test('none → pending request: the caller lacks manageCacheSubscriptions', async (t) => {
    t.equal(await subscriptions.subscribeProject(ada, 'web', 'shared', 1), 'Subscription requested');
    const listed = await subscriptions.listProject(ada, 'web');
    t.same(listed.subscriptions, [], 'grants nothing while pending');
    t.match(listed.requests, [{ project: 'acme/web', cache: 'shared', mode: 1, requester: 'ada' }]);
    t.equal(await subscriptions.subscribeProject(ada, 'web', 'shared', 2), 'Subscription requested', 'asking again updates the request');
    t.match(await subscriptions.listRequests(cat, 'shared'), [{ mode: 2 }]);
    t.same(f.approved, []);
  });

  t.test('a project member without manageSubscriptions cannot ask; a private cache is not revealed', async (t) => {
    await t.rejects(subscriptions.subscribeProject(bob, 'web', 'shared', 0), { name: 'ApiError', status: 403, message: /manageSubscriptions is required/ });
    await t.rejects(subscriptions.subscribeProject(ada, 'web', 'secret', 0), { name: 'ApiError', status: 404, message: 'no cache "secret"' });
    await t.rejects(subscriptions.subscribeProject(ada, 'web', 'nothing', 0), { name: 'ApiError', status: 404, message: 'no cache "nothing"' });
  });

  t.test('only a cache admin sees and decides requests', async (t) => {
    await t.rejects(subscriptions.listRequests(ada, 'shared'), { name: 'ApiError', status: 403, message: /manageCacheSubscriptions/ });
    const [req] = await subscriptions.listRequests(cat, 'shared');
    await t.rejects(subscriptions.approve(ada, 'shared', req!.id), { name: 'ApiError', status: 403 });
    await t.rejects(subscriptions.approve(cat, 'shared', '00000000-0000-4000-8000-000000000000'), { name: 'ApiError', status: 404 });
  });

  t.test('pending → active: approve, with the requested mode; the hook runs', async (t) => {
    const [req] = await subscriptions.listRequests(cat, 'shared');
    t.equal(await subscriptions.approve(cat, 'shared', req!.id), 'Subscribed');
    t.match((await subscriptions.listProject(ada, 'web')).subscriptions, [{ cache: 'shared', mode: 2, via: 'project' }]);
    t.same(await subscriptions.listRequests(cat, 'shared'), []);
    t.same(f.approved, [web.id]);
    t.match(await subscriptions.listSubscribers(cat, 'shared'), [{ project: 'acme/web', organization: 'acme', mode: 2 }]);
  });

  t.test('active → none: unsubscribe', async (t) => {
    t.equal(await subscriptions.unsubscribeProject(ada, 'web', 'shared'), 'Unsubscribed');
    t.same((await subscriptions.listProject(ada, 'web')).subscriptions, []);
    await t.rejects(subscriptions.unsubscribeProject(ada, 'web', 'shared'), { name: 'ApiError', status: 404, code: 'not_subscribed' });
  });

  t.test('pending → deleted: deny; the project may ask again', async (t) => {
    await subscriptions.subscribeProject(ada, 'web', 'shared', 0);
    const [req] = await subscriptions.listRequests(cat, 'shared');
    t.equal(await subscriptions.deny(cat, 'shared', req!.id), 'Subscription request denied');
    t.same((await subscriptions.listProject(ada, 'web')).requests, []);
    t.equal(await subscriptions.subscribeProject(ada, 'web', 'shared', 0), 'Subscription requested');
  });

  t.test('pending → deleted: the project cancels with DELETE on the subscribe path', async (t) => {
    t.equal(await subscriptions.unsubscribeProject(ada, 'web', 'shared'), 'Subscription request cancelled');
    t.same(await subscriptions.listRequests(cat, 'shared'), []);
    await t.rejects(subscriptions.unsubscribeProject(bob, 'web', 'shared'), { name: 'ApiError', status: 403 });
  });

  t.test('none → active at once: the caller holds both permissions', async (t) => {
    await f.sql`insert into project_members (project_id, user_id, role) values (${web.id}, ${cat.userId}, 'Admin')`;
    f.approved.length = 0;
    t.equal(await subscriptions.subscribeProject(cat, 'web', 'shared', 0), 'Subscribed');
    t.match((await subscriptions.listProject(ada, 'web')).subscriptions, [{ cache: 'shared', mode: 0 }]);
    t.same(f.approved, [web.id]);
    t.equal(await subscriptions.subscribeProject(cat, 'web', 'shared', 1), 'Subscribed', 'changes the mode');
    t.match((await subscriptions.listProject(ada, 'web')).subscriptions, [{ mode: 1 }]);
    t.equal(await subscriptions.subscribeProject(ada, 'web', 'shared', 1), 'Subscribed', 'asking for what is active needs no request');
    t.same(await subscriptions.listRequests(cat, 'shared'), []);
  });

  t.test('an API key acts with its own permissions: without manageCacheSubscriptions it only requests', async (t) => {
    await subscriptions.unsubscribeProject(cat, 'web', 'shared');
    const narrow = f.key(cat, ['viewProject', 'manageSubscriptions', 'viewCache']);
    t.equal(await subscriptions.subscribeProject(narrow, 'web', 'shared', 0), 'Subscription requested');
    const pinnedElsewhere = f.key(cat, ['viewCache', 'manageCacheSubscriptions'], { cacheId: shared });
    await t.rejects(subscriptions.subscribeProject(pinnedElsewhere, 'web', 'shared', 0), { name: 'ApiError', status: 404 }, 'a cache-pinned key sees no project');
  });

  t.test('state-managed subscriptions refuse the API', async (t) => {
    await f.sql`update subscriptions set state_managed = true`;
    await f.sql`insert into subscriptions (project_id, cache_id, mode, state_managed) values (${web.id}, ${shared}, 0, true) on conflict do nothing`;
    await t.rejects(subscriptions.unsubscribeProject(ada, 'web', 'shared'), { name: 'ApiError', status: 403, code: 'state_managed' });
  });
});

t.test('organization subscriptions apply to every project of the organization', async (t) => {
  const f = await accessFixture(t);
  const { subscriptions, organizations, projects } = f.services;
  const ada = await f.user('ada');
  const cat = await f.user('cat');
  await organizations.create(ada, { name: 'acme' });
  const web = await projects.create(ada, 'acme', { name: 'web', repository: 'file:///x' });
  const api = await projects.create(ada, 'acme', { name: 'api', repository: 'file:///x' });
  await f.cache('shared', { owner: cat, public: true });

  t.equal(await subscriptions.subscribeOrganization(ada, 'acme', 'shared', 0), 'Subscription requested');
  const [req] = await subscriptions.listRequests(cat, 'shared');
  t.match(req, { project: null, organization: 'acme' });
  await subscriptions.approve(cat, 'shared', req!.id);
  t.same([...f.approved].sort(), [web.id, api.id].sort(), 'the hook runs for each project');
  t.match((await subscriptions.listProject(ada, 'web')).subscriptions, [{ cache: 'shared', via: 'organization' }]);
  t.match(await subscriptions.listOrganization(ada, 'acme'), { subscriptions: [{ cache: 'shared', mode: 0 }] });
  t.equal(await subscriptions.unsubscribeOrganization(ada, 'acme', 'shared'), 'Unsubscribed');
  const bob = await f.user('bob');
  await t.rejects(subscriptions.subscribeOrganization(bob, 'acme', 'shared', 0), { name: 'ApiError', status: 404 });
});
