import t, { type Test } from 'tap';
import { permissionNames, type Permission } from '../../../protocol/index.js';
import { createTestCache } from '../../support/caches.js';
import { signUp, type TestAccount } from '../../support/accounts.js';
import { eventually, openLive, type LiveClient, type LiveRefusal } from '../../support/events.js';
import { quietFor } from '../../support/eventually.js';
import { startTestKiln, type TestKiln } from '../../support/kiln.js';
import { insertFinishedBuild, insertFinishedEvaluation } from '../../support/modelRows.js';

// Who may open each live WebSocket, on one real server whose evaluation, build and task checks
// are the ones the composition root wires (cli/kiln.ts), nothing stubbed. A socket refused before
// the upgrade answers an HTTP status; one refused after it is closed with 4000 + the status and
// the reason "<code>: <message>" (docs/events.md, Connecting). Each case asserts which of the two,
// exactly; an admitted socket must also receive its events and nobody else's.

const E = '5e1a0000-0000-4000-8000-0000000000e1'; // an evaluation of acme/web
const B = '5e1a0000-0000-4000-8000-0000000000b1'; // a build of E
const F = '5e1a0000-0000-4000-8000-0000000000f1'; // an evaluation of acme/other

type Outcome = { admitted: LiveClient } | { upgrade: number; code: string | undefined } | { close: number; reason: string };
type Expected = 'admitted' | { upgrade: number; code: string } | { close: number; reason: string };

async function attempt(kiln: TestKiln, path: string, token: string | undefined): Promise<Outcome> {
  try {
    return { admitted: await openLive(kiln, path, token) };
  } catch (e) {
    const refusal = e as LiveRefusal;
    if (refusal.closeCode === undefined) throw e;
    if (refusal.closeCode === null) return { upgrade: refusal.status, code: refusal.body.code };
    return { close: refusal.closeCode, reason: refusal.body.code === undefined ? `${refusal.body.message}` : `${refusal.body.code}: ${refusal.body.message}` };
  }
}

/**
 * Resolves once the server has answered a ping on the socket. uWS sends its pong through the
 * socket's send, which first sends what topics hold for it: every frame published before the ping
 * has then arrived (one TCP stream, in order), so a frame that has not is not coming.
 */
async function settled(client: LiveClient): Promise<void> {
  await new Promise<void>((resolve) => {
    client.socket.once('pong', () => resolve());
    client.socket.ping();
  });
  // Through a serving thread's relay (KILN_TEST_HTTP_THREADS other than 1) the pong is the thread's
  // own (uWS answers pings itself), sent after what the thread forwarded but maybe before what the
  // main thread has just written to it: wait until the frames stop coming, too.
  if (!relayed) return;
  for (let count = -1; count !== client.frames.length; ) {
    count = client.frames.length;
    await quietFor(150);
  }
}
const relayed = (process.env['KILN_TEST_HTTP_THREADS'] ?? '1') !== '1';

interface World {
  kiln: TestKiln;
  /** credentials by name; undefined: no token at all */
  tokens: Record<string, string | undefined>;
  ids: { web: string; other: string; webTask: string; otherTask: string };
}

let keys = 0;
async function createKey(kiln: TestKiln, user: TestAccount, body: { permissions: readonly Permission[]; project?: string; cache?: string }): Promise<string> {
  const res = await kiln.api<{ secret: string }>('POST', '/user/keys', { token: user.token, body: { name: `key-${++keys}`, ...body } });
  if (res.status !== 200) throw new Error(`key ${JSON.stringify(body)} of ${user.username}: ${res.status} ${JSON.stringify(res.message)}`);
  return res.message.secret;
}

async function project(kiln: TestKiln, owner: TestAccount, org: string, name: string): Promise<string> {
  const res = await kiln.api<{ id: string }>('PUT', `/projects/${org}`, { token: owner.token, body: { name, repository: `https://git.example/${name}.git` } });
  if (res.status !== 200) throw new Error(`project ${org}/${name}: ${res.status} ${JSON.stringify(res.message)}`);
  return res.message.id;
}

/**
 * root: the superuser, a member of nothing but its own ops/tools. acme (ada Admin, vic View) has
 * projects web (evaluation E, build B) and other (evaluation F; pat is a member of that project
 * only). rex owns rival/site. eve is a member of nothing. Caches: main (ada's, private), pub
 * (ada's, public), hidden (rex's, private).
 */
async function world(t: Test): Promise<World> {
  const kiln = await startTestKiln(t);
  const root = await signUp(kiln, 'root'); // the first account: superuser
  const [ada, vic, pat, rex, eve] = [await signUp(kiln, 'ada'), await signUp(kiln, 'vic'), await signUp(kiln, 'pat'), await signUp(kiln, 'rex'), await signUp(kiln, 'eve')];
  for (const [owner, org] of [[ada, 'acme'], [rex, 'rival'], [root, 'ops']] as const) {
    const res = await kiln.api('PUT', '/orgs', { token: owner.token, body: { name: org } });
    if (res.status !== 200) throw new Error(`org ${org}: ${res.status}`);
  }
  const web = await project(kiln, ada, 'acme', 'web');
  const other = await project(kiln, ada, 'acme', 'other');
  await project(kiln, rex, 'rival', 'site');
  await project(kiln, root, 'ops', 'tools');
  await kiln.sql`insert into organization_members (organization_id, user_id, role) select id, ${vic.id}, 'View' from organizations where name = 'acme'`;
  await kiln.sql`insert into project_members (project_id, user_id, role) values (${other}, ${pat.id}, 'Admin')`;
  const taskOf = async (projectId: string) => (await kiln.sql<{ id: string }[]>`select id from tasks where project_id = ${projectId} and name = 'default'`)[0]!.id;
  const [webTask, otherTask] = [await taskOf(web), await taskOf(other)];
  await insertFinishedBuild(kiln.sql, { taskId: webTask, evaluationId: E, buildId: B });
  await insertFinishedEvaluation(kiln.sql, otherTask, F);
  await createTestCache(kiln.sql, 'main', { ownerId: ada.id });
  await createTestCache(kiln.sql, 'pub', { ownerId: ada.id, public: true });
  await createTestCache(kiln.sql, 'hidden', { ownerId: rex.id });

  const all = permissionNames;
  const allBut = (p: Permission) => permissionNames.filter((q) => q !== p);
  const tokens: World['tokens'] = {
    anonymous: undefined,
    invalid: 'not-a-token',
    root: root.token,
    rootKey: await createKey(kiln, root, { permissions: all }),
    rootKeyWithoutAdmin: await createKey(kiln, root, { permissions: allBut('admin') }),
    rootKeyPinnedToProject: await createKey(kiln, root, { permissions: all, project: 'ops/tools' }),
    rootKeyPinnedToCache: await createKey(kiln, root, { permissions: all, cache: 'pub' }),
    ada: ada.token,
    adaKeyPinnedToMain: await createKey(kiln, ada, { permissions: all, cache: 'main' }),
    adaKeyPinnedToWeb: await createKey(kiln, ada, { permissions: all, project: 'acme/web' }),
    adaKeyWithoutViewCache: await createKey(kiln, ada, { permissions: allBut('viewCache') }),
    vic: vic.token,
    vicKey: await createKey(kiln, vic, { permissions: all }),
    vicKeyPinnedToWeb: await createKey(kiln, vic, { permissions: all, project: 'acme/web' }),
    vicKeyWithoutViewProject: await createKey(kiln, vic, { permissions: allBut('viewProject') }),
    vicKeyPinnedToOther: await createKey(kiln, vic, { permissions: all, project: 'acme/other' }),
    vicKeyPinnedToCache: await createKey(kiln, vic, { permissions: all, cache: 'pub' }),
    pat: pat.token,
    rex: rex.token,
    eve: eve.token,
  };
  return { kiln, tokens, ids: { web, other, webTask, otherTask } };
}

/** Opens `path` with each credential and asserts the outcome; answers the admitted sockets by credential. */
async function expectOutcomes(t: Test, w: World, path: string, cases: Record<string, Expected>): Promise<Map<string, LiveClient>> {
  const admitted = new Map<string, LiveClient>();
  t.teardown(() => admitted.forEach((c) => c.close()));
  for (const [who, expected] of Object.entries(cases)) {
    if (!(who in w.tokens)) throw new Error(`no credential ${who}`);
    const outcome = await attempt(w.kiln, path, w.tokens[who]);
    if ('admitted' in outcome) admitted.set(who, outcome.admitted);
    const seen = 'admitted' in outcome ? 'admitted' : outcome;
    t.same(seen, expected, `${path} × ${who}: ${JSON.stringify(expected)}`);
  }
  return admitted;
}

const closed = (status: number, reason: string) => ({ close: 4000 + status, reason });
const noToken = { upgrade: 401, code: 'unauthorized' } as const;
const badToken = closed(401, 'invalid_token: the bearer token is not valid');

/** The cases every project socket shares: only who can view acme/web with viewProject gets in. */
function projectCases(notFound: string): Record<string, Expected> {
  const hidden = closed(404, `not_found: ${notFound}`);
  return {
    anonymous: noToken,
    invalid: badToken,
    eve: hidden, // a stranger
    rex: hidden, // a member of another organization
    pat: hidden, // a member of another project of the same organization
    root: hidden, // a superuser is not an implicit member
    rootKey: hidden,
    vicKeyWithoutViewProject: closed(403, 'forbidden: viewProject is required on project "acme/web"'),
    vicKeyPinnedToOther: hidden,
    vicKeyPinnedToCache: hidden,
    ada: 'admitted',
    vic: 'admitted',
    vicKey: 'admitted',
    vicKeyPinnedToWeb: 'admitted',
  };
}

function evaluationEvent(w: World, evaluationId: string, project: 'web' | 'other'): void {
  const [projectId, taskId] = project === 'web' ? [w.ids.web, w.ids.webTask] : [w.ids.other, w.ids.otherTask];
  const content = { evaluation_id: evaluationId, project: `acme/${project}`, task: 'default', phase: 'building' as const, builds_total: 1, builds_done: 0, builds_failed: 0 };
  w.kiln.events.events.publish('evaluation.progress', content, { projectId, taskId, evaluationId });
}

function buildEvent(w: World, buildId: string, evaluationId: string, project: 'web' | 'other'): void {
  const [projectId, taskId] = project === 'web' ? [w.ids.web, w.ids.webTask] : [w.ids.other, w.ids.otherTask];
  const content = { build_id: buildId, derivation_build: buildId, evaluation_id: evaluationId, status: 'started' as const, task: 'default', project: `acme/${project}` };
  w.kiln.events.events.publish('build.progress', { ...content, phase: 'uploading', bytes: 1, paths: 1 }, { projectId, taskId, evaluationId, buildId });
}

/** What each admitted socket received, as "<event> <id>", once nothing more is on its way. */
async function received(admitted: Map<string, LiveClient>, id: (content: Record<string, unknown>) => unknown): Promise<Record<string, string[]>> {
  const seen: Record<string, string[]> = {};
  for (const [who, client] of admitted) {
    await settled(client);
    seen[who] = client.frames.map((f) => `${f.event} ${String(id(f.content))}`);
  }
  return seen;
}

const everyone = <T>(admitted: Map<string, LiveClient>, value: T): Record<string, T> => Object.fromEntries([...admitted.keys()].map((k) => [k, value]));

t.test('live sockets against the real resolvers', async (t) => {
  const w = await world(t);
  // A project that is not acme/web's events, then acme/web's: an admitted socket gets its own only.
  const publishProjectEvents = () => {
    evaluationEvent(w, F, 'other');
    buildEvent(w, '5e1a0000-0000-4000-8000-0000000000b2', F, 'other');
    evaluationEvent(w, E, 'web');
    buildEvent(w, B, E, 'web');
  };
  const evaluationId = (c: Record<string, unknown>) => c['evaluation_id'];
  const buildId = (c: Record<string, unknown>) => c['build_id'] ?? c['evaluation_id'];

  t.test('/tasks/{project}/{task}/live', async (t) => {
    const admitted = await expectOutcomes(t, w, '/tasks/web/default/live', projectCases('no project "web" (a name several organizations use must be given as the project\'s UUID)'));
    publishProjectEvents();
    t.same(await received(admitted, evaluationId), everyone(admitted, [`evaluation.progress ${E}`]), 'the task\'s evaluation events only');
  });

  t.test('/evals/{evaluation}/live', async (t) => {
    const admitted = await expectOutcomes(t, w, `/evals/${E}/live`, projectCases(`no evaluation ${E}`));
    publishProjectEvents();
    t.same(await received(admitted, evaluationId), everyone(admitted, [`evaluation.progress ${E}`]), 'E\'s events only');
  });

  t.test('/builds/{build}/live', async (t) => {
    const admitted = await expectOutcomes(t, w, `/builds/${B}/live`, projectCases(`no build ${B}`));
    publishProjectEvents();
    t.same(await received(admitted, buildId), everyone(admitted, [`evaluation.progress ${E}`, `build.progress ${B}`]), 'its evaluation\'s events and its own progress');
  });

  for (const [path, what] of [['/metrics/events', 'the firehose'], ['/board/live', 'the worker board']] as const) {
    t.test(path, async (t) => {
      const forbidden = closed(403, `forbidden: ${what} is for superusers`);
      const admitted = await expectOutcomes(t, w, path, {
        anonymous: noToken,
        invalid: badToken,
        eve: forbidden,
        rex: forbidden,
        ada: forbidden, // an organization admin is no superuser
        vicKey: forbidden, // admin in a non-superuser's key gives nothing
        rootKeyWithoutAdmin: closed(403, `forbidden: ${what} is for superusers: a superuser's API key needs the admin permission`),
        rootKeyPinnedToProject: closed(403, `forbidden: ${what} is for superusers: a key pinned to a project or cache never has superuser powers`),
        rootKeyPinnedToCache: closed(403, `forbidden: ${what} is for superusers: a key pinned to a project or cache never has superuser powers`),
        root: 'admitted',
        rootKey: 'admitted',
      });
      w.kiln.events.events.publish('worker.connected', { worker: E });
      // The firehose sends from a later turn, not through uWS topics: wait for the event itself.
      await eventually('worker.connected on every admitted socket', async () => ([...admitted.values()].every((c) => c.frames.length > 0) ? true : undefined));
      t.same(await received(admitted, (c) => c['worker']), everyone(admitted, [`worker.connected ${E}`]));
    });
  }

  t.test('/board/cache/live: every signed-in caller, told about the caches it can view', async (t) => {
    const admitted = await expectOutcomes(t, w, '/board/cache/live', {
      anonymous: noToken,
      invalid: badToken,
      ...Object.fromEntries(['root', 'rootKey', 'rootKeyWithoutAdmin', 'rootKeyPinnedToProject', 'ada', 'adaKeyPinnedToMain', 'adaKeyPinnedToWeb', 'adaKeyWithoutViewCache', 'vicKeyPinnedToCache', 'rex', 'eve'].map((who) => [who, 'admitted'])),
    });
    const caches = Object.fromEntries((await w.kiln.sql<{ name: string; id: string }[]>`select name, id from caches`).map((c) => [c.name, c.id]));
    for (const cache of ['main', 'pub', 'hidden']) w.kiln.events.events.publish('cache.changed', { cache }, { cacheId: caches[cache] });
    const changed = (...names: string[]) => names.map((n) => `cache.changed ${n}`);
    t.same(await received(admitted, (c) => c['cache']), {
      root: changed('main', 'pub', 'hidden'), // a superuser: every cache
      rootKey: changed('main', 'pub', 'hidden'),
      rootKeyWithoutAdmin: changed('pub'), // no superuser powers: what it can view
      rootKeyPinnedToProject: changed('pub'),
      ada: changed('main', 'pub'), // its own caches and the public one
      adaKeyPinnedToMain: changed('main'), // a key pinned to a cache sees nothing else, not even a public cache
      adaKeyPinnedToWeb: changed('main', 'pub'), // a key pinned to a project reaches its owner's caches
      adaKeyWithoutViewCache: changed(), // the key's list decides too
      vicKeyPinnedToCache: changed('pub'),
      rex: changed('pub', 'hidden'),
      eve: changed('pub'), // a stranger: public caches only
    }, 'each socket: cache.changed of the caches its caller can view');
  });
});
