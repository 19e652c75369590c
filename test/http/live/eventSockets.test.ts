import t from 'tap';
import WebSocket from 'ws';
import { signUp } from '../../support/accounts.js';
import { createApiKey } from '../../support/narUploads.js';
import { insertFinishedBuild } from '../../support/modelRows.js';
import { eventually, openLive, startEventKiln, type LiveClient, type LiveRefusal } from '../../support/events.js';

// The firehose and the live paths over real WebSockets.

const E = '7f1c2a9e-3b4d-4c5e-8f60-718293a4b5c6';
const B = '0b9a8c7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d';

async function refused(p: Promise<LiveClient>): Promise<Pick<LiveRefusal, 'status' | 'body'>> {
  try {
    const client = await p;
    client.close();
    return { status: 101, body: {} };
  } catch (e) {
    return e as LiveRefusal;
  }
}

t.test('the firehose: superusers only, filtered by globs, tokens by header or query', async (t) => {
  const kiln = await startEventKiln(t);
  const ada = await signUp(kiln, 'ada');
  const eve = await signUp(kiln, 'eve');
  t.match(await refused(openLive(kiln, '/metrics/events')), { status: 401, body: { code: 'unauthorized' } });
  t.match(await refused(openLive(kiln, '/metrics/events', 'not-a-token')), { status: 401, body: { code: 'invalid_token' } });
  t.match(await refused(openLive(kiln, '/metrics/events', eve.token)), { status: 403, body: { code: 'forbidden', message: 'the firehose is for superusers' } });
  t.match(await refused(openLive(kiln, '/metrics/events?events=Build.*', ada.token)), { status: 400, body: { code: 'invalid_query' } });
  t.match(await refused(openLive(kiln, '/evals/not-a-uuid/live', ada.token)), { status: 400, body: { code: 'invalid_parameter', message: 'evaluation: must be a UUID' } });

  const builds = await openLive(kiln, '/metrics/events?events=build.*,task.star', ada.token);
  const all = await openLive(kiln, '/metrics/events', ada.token, 'query');
  t.teardown(() => {
    builds.close();
    all.close();
  });
  const { events } = kiln.events;
  events.publish('worker.connected', { worker: E });
  events.publish('build.progress', { build_id: B, derivation_build: B, evaluation_id: E, status: 'started', task: 'default', project: 'acme/web', phase: 'uploading', bytes: 5, paths: 1 });
  await events.transaction(async (_tx, emit) => emit('user.create', { user: 'zed', user_id: E }));
  await all.waitFor(3);
  t.same(all.frames.map((f) => f.event), ['worker.connected', 'build.progress', 'user.create'], 'every event, durable or not');
  await builds.waitFor(1);
  t.same(builds.frames.map((f) => f.event), ['build.progress'], 'only what the globs match');
  t.match(builds.frames[0], { at: /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, content: { bytes: 5 } });
});

t.test('the firehose sends only events its globs match: stream.open only to globs that ask for it', async (t) => {
  const kiln = await startEventKiln(t);
  const ada = await signUp(kiln, 'ada');
  const url = `${kiln.url.replace(/^http/, 'ws')}/api/v1/metrics/events?events=worker.connected`;
  const socket = new WebSocket(url, { headers: { authorization: `Bearer ${ada.token}` } });
  const frames: { event: string; content: Record<string, unknown> }[] = [];
  socket.on('message', (data: Buffer) => frames.push(JSON.parse(data.toString('utf8')) as (typeof frames)[number]));
  t.teardown(() => socket.close());
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
  // No frame says when the subscription is in place, so publish until one arrives: stream.open,
  // had it been sent, would come before it.
  await eventually('a worker.connected frame', async () => {
    if (frames.length > 0) return true;
    kiln.events.events.publish('worker.connected', { worker: E });
    return undefined;
  });
  t.same([...new Set(frames.map((f) => f.event))], ['worker.connected'], 'the first frame and every other is a matching event');

  const asked = await openLive(kiln, '/metrics/events?events=worker.*,stream.open', ada.token);
  t.teardown(() => asked.close());
  kiln.events.events.publish('worker.connected', { worker: E });
  await asked.waitFor(1);
  t.same(asked.frames.map((f) => f.event), ['worker.connected'], 'stream.open came first (openLive checks it), then events');
});

t.test('superuser powers on the sockets: a session, or an unpinned key holding admin', async (t) => {
  const kiln = await startEventKiln(t);
  const ada = await signUp(kiln, 'ada'); // the first account: superuser
  const eve = await signUp(kiln, 'eve');
  const withAdmin = await createApiKey(kiln, ada.token, 'ops', ['admin']);
  const withoutAdmin = await createApiKey(kiln, ada.token, 'ci', ['viewProject', 'viewCache', 'writeStore']);
  const eveAdmin = await createApiKey(kiln, eve.token, 'ops', ['admin']);
  await kiln.sql`insert into caches (name, owner_id, key_name, public_key, secret_key)
    values ('main', ${ada.id}, 'main-1', ${Buffer.alloc(32, 1)}, ${Buffer.alloc(64, 2)})`;
  const pinned = (await kiln.api<{ secret: string }>('POST', '/user/keys', { token: ada.token, body: { name: 'pinned', permissions: ['admin'], cache: 'main' } })).message.secret;
  for (const path of ['/metrics/events', '/board/live']) {
    const opened = await openLive(kiln, path, withAdmin);
    opened.close();
    t.pass(`${path}: a superuser's key with admin opens it`);
    t.match(await refused(openLive(kiln, path, withoutAdmin)), { status: 403, body: { code: 'forbidden', message: /a superuser's API key needs the admin permission/ } });
    t.match(await refused(openLive(kiln, path, pinned)), { status: 403, body: { code: 'forbidden', message: /pinned to a project or cache never has superuser powers/ } });
    t.match(await refused(openLive(kiln, path, eveAdmin)), { status: 403, body: { code: 'forbidden' } }, `${path}: admin gives nothing to a key of another account`);
  }
});

t.test('a lagging firehose subscriber gets stream.lagged with the number it missed, then the newest', async (t) => {
  const kiln = await startEventKiln(t, { options: { firehoseLagBytes: 64 * 1024 } });
  const ada = await signUp(kiln, 'ada');
  const slow = await openLive(kiln, '/metrics/events?events=worker.*', ada.token);
  const other = await openLive(kiln, '/metrics/events?events=task.*', ada.token);
  t.teardown(() => {
    slow.close();
    other.close();
  });
  slow.socket.pause();
  const padding = 'x'.repeat(10_000);
  let n = 0;
  const publish = () => {
    kiln.events.bus.publish({ event: 'worker.queue_depth', scope: {}, frame: JSON.stringify({ event: 'worker.queue_depth', at: new Date().toISOString(), content: { queued: n++, padding } }) });
  };
  // 30 MB for a reader that does not read: far past the kernel's buffers and the 64 KiB bound.
  const N = 3000;
  while (n < N) {
    publish();
    if (n % 100 === 0) await new Promise((r) => setImmediate(r));
  }
  slow.socket.resume();
  // Keep publishing until an event arrives after the last notice (one published while the socket
  // still lagged would only be counted as skipped).
  await eventually('an event after the last stream.lagged', async () => {
    const last = slow.frames.at(-1);
    if (last && last.event !== 'stream.lagged' && (last.content['queued'] as number) >= N && slow.frames.some((f) => f.event === 'stream.lagged')) return true;
    publish();
    return undefined;
  });
  const published = n;
  const lastSeen = slow.frames.at(-1)!.content['queued'] as number;
  let previous = -1;
  let received = 0;
  let skippedTotal = 0;
  let notices = 0;
  let disorder = 0;
  for (const [i, f] of slow.frames.entries()) {
    if (f.event === 'stream.lagged') {
      notices += 1;
      const skipped = f.content['skipped'] as number;
      skippedTotal += skipped;
      const next = slow.frames[i + 1]!.content['queued'] as number;
      t.equal(next - previous - 1, skipped, `notice ${notices}: skipped ${skipped}, exactly the gap between ${previous} and ${next}`);
    } else {
      const queued = f.content['queued'] as number;
      if (queued <= previous) disorder += 1;
      previous = queued;
      received += 1;
    }
  }
  t.equal(disorder, 0, 'events arrive in order, none twice');
  t.ok(notices >= 1 && skippedTotal > 0, `${notices} notice(s), ${skippedTotal} skipped`);
  t.equal(received + skippedTotal, lastSeen + 1, 'every event up to the last is either received or counted as skipped');
  t.ok(lastSeen < published, 'nothing beyond what was published');
  t.equal(other.frames.length, 0, 'another filter saw none of it');
});

// Who may open which path, case by case: liveSocketAuthorization.test.ts. Here: what each receives.
t.test('live paths: topics per task, evaluation, build and board', async (t) => {
  const kiln = await startEventKiln(t);
  const ada = await signUp(kiln, 'ada');
  const vic = await signUp(kiln, 'vic');
  const eve = await signUp(kiln, 'eve');
  await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } });
  await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'web', repository: 'https://git.example/web.git' } });
  await kiln.api('POST', '/orgs/acme/users', { token: ada.token, body: { user: 'vic', role: 'View' } });
  await kiln.api('PUT', '/caches', { token: ada.token, body: { name: 'main' } });
  await kiln.api('PUT', '/caches', { token: ada.token, body: { name: 'pub', public: true } });
  const [ids] = await kiln.sql<{ task: string; project: string }[]>`select t.id as task, p.id as project from tasks t join projects p on p.id = t.project_id`;
  await insertFinishedBuild(kiln.sql, { taskId: ids!.task, evaluationId: E, buildId: B });
  const caches = Object.fromEntries((await kiln.sql<{ name: string; id: string }[]>`select name, id from caches`).map((c) => [c.name, c.id]));

  t.match(await refused(openLive(kiln, '/tasks/web/default/live', eve.token)), { status: 404 }, 'a stranger does not see the project');
  t.match(await refused(openLive(kiln, '/tasks/web/nope/live', vic.token)), { status: 404, body: { message: 'no task "nope" in project "acme/web"' } });
  t.match(await refused(openLive(kiln, '/board/live', vic.token)), { status: 403 });
  const task = await openLive(kiln, '/tasks/web/default/live', vic.token);
  const evaluation = await openLive(kiln, `/evals/${E}/live`, vic.token);
  const build = await openLive(kiln, `/builds/${B}/live`, vic.token);
  const board = await openLive(kiln, '/board/live', ada.token);
  const cacheBoardAda = await openLive(kiln, '/board/cache/live', ada.token);
  const cacheBoardEve = await openLive(kiln, '/board/cache/live', eve.token, 'query');
  t.teardown(() => [task, evaluation, build, board, cacheBoardAda, cacheBoardEve].forEach((c) => c.close()));

  const { events } = kiln.events;
  const scope = { projectId: ids!.project, taskId: ids!.task, evaluationId: E };
  const evalContent = { evaluation_id: E, project: 'acme/web', task: 'default' };
  const buildContent = { build_id: B, derivation_build: B, evaluation_id: E, status: 'started' as const, task: 'default', project: 'acme/web' };
  await events.transaction(async (_tx, emit) => emit('evaluation.building', { ...evalContent, phase: 'building' }, scope));
  events.publish('evaluation.progress', { ...evalContent, phase: 'building', builds_total: 2, builds_done: 1, builds_failed: 0 }, scope);
  events.publish('evaluation.activity', { ...evalContent, kind: 'eval', message: 'evaluating packages.x86_64-linux.hello' }, scope);
  events.publish('build.status_changed', { ...buildContent, previous: 'queued' }, { ...scope, buildId: B });
  events.publish('build.progress', { ...buildContent, phase: 'uploading', bytes: 1, paths: 1 }, { ...scope, buildId: B });
  events.publish('worker.connected', { worker: E });
  events.publish('worker.dead', { worker: E });
  events.publish('cache.changed', { cache: 'main' }, { cacheId: caches['main'] });
  events.publish('cache.changed', { cache: 'pub' }, { cacheId: caches['pub'] });
  events.publish('evaluation.progress', { ...evalContent, evaluation_id: B, phase: 'building', builds_total: 1, builds_done: 0, builds_failed: 0 }, { evaluationId: B });

  await task.waitFor(4);
  t.same(task.frames.map((f) => f.event), ['evaluation.building', 'evaluation.progress', 'evaluation.activity', 'build.status_changed'], 'task: phases, progress, activity, build transitions');
  await evaluation.waitFor(4);
  t.same(evaluation.frames.map((f) => f.event), ['evaluation.building', 'evaluation.progress', 'evaluation.activity', 'build.status_changed'], 'evaluation: the same for one evaluation');
  await build.waitFor(4);
  t.same(build.frames.map((f) => f.event), ['evaluation.building', 'evaluation.progress', 'build.status_changed', 'build.progress'], 'build: no activity, plus its progress');
  await board.waitFor(1);
  await cacheBoardAda.waitFor(2);
  await cacheBoardEve.waitFor(1);
  // A last event everyone would get had they subscribed, so that nothing else is still on its way.
  await eventually('settled', async () => (task.frames.length === 4 && board.frames.length === 1 ? true : undefined));
  t.same(board.frames.map((f) => f.event), ['worker.connected'], 'board: the four worker events only');
  t.same(cacheBoardAda.frames.map((f) => f.content['cache']), ['main', 'pub'], 'a superuser’s cache board: every cache');
  t.same(cacheBoardEve.frames.map((f) => f.content['cache']), ['pub'], 'anyone else’s: the caches they can view');
  t.match(await refused(openLive(kiln, `/evals/${E}/live`)), { status: 401 });
});
