// POST /builds and GET /builds/direct/recent on a real server: a synthetic closure (no Nix) is
// signed into the project's cache, recorded as a 'direct' evaluation and offered to the
// scheduler (its ready-build query returns the input first, then the root); malformed bodies
// and missing caches are 4xx that name the problem.
import t from 'tap';
import { signUp, type TestAccount } from '../../../support/accounts.js';
import { createTestCache, type TestCache } from '../../../support/caches.js';
import { startTestKiln, type TestKiln } from '../../../support/kiln.js';
import { exportStream, multipartBody, syntheticDrv, textFile, type ClosurePath } from '../../../support/directClosure.js';
import { readyBuilds } from '../../../../services/builds/schedulerQueries.js';

interface BuildView { build_id: string; derivation_build: string; evaluation_id: string; drv_path: string; status: string; entry_point: boolean; failure: { reason: string } | null }

async function post(kiln: TestKiln, token: string | null, fields: [string, string | Buffer][], contentType?: string) {
  const { body, contentType: type } = multipartBody(fields);
  const res = await fetch(`${kiln.url}/api/v1/builds`, {
    method: 'POST', body, headers: { 'content-type': contentType ?? type, ...(token ? { authorization: `Bearer ${token}` } : {}) },
  });
  const json = (await res.json()) as { error: boolean; message: unknown; code?: string };
  return { status: res.status, message: json.message, code: json.code };
}

t.test('direct builds', async (t) => {
  const kiln = await startTestKiln(t);
  const ada: TestAccount = await signUp(kiln, 'ada');
  const bob: TestAccount = await signUp(kiln, 'bob');
  t.equal((await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } })).status, 200);
  t.equal((await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'app', repository: 'file:///nonexistent' } })).status, 200);
  t.equal((await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'bare', repository: 'file:///nonexistent' } })).status, 200);
  const [project] = await kiln.sql<{ id: string }[]>`select id from projects where name = 'app'`;
  const cache: TestCache = await createTestCache(kiln.sql, 'main', { public: true });
  await kiln.sql`insert into subscriptions (project_id, cache_id, mode) values (${project!.id}, ${cache.id}, 0)`;

  const note = textFile('kiln-note', 'input text');
  const dep = syntheticDrv('kiln-dep');
  const top = syntheticDrv('kiln-top', { inputDrvs: [dep], inputSrcs: [note.path], env: { requiredSystemFeatures: 'kvm big-parallel', timeout: '60' } });
  const closure = exportStream([note, dep, top]);

  t.test('a submitted closure becomes dispatchable rows', async (t) => {
    const res = await post(kiln, ada.token, [['project', 'acme/app'], ['closure', closure]]);
    t.equal(res.status, 200, JSON.stringify(res.message));
    const build = res.message as BuildView;
    t.match(build, { drv_path: top.drvPath, status: 'queued', entry_point: true });
    const [evaluation] = await kiln.sql<{ kind: string; phase: string; task: string; commit: string | null }[]>`
      select e.kind, e.phase, t.name as task, e.commit from evaluations e join tasks t on t.id = e.task_id where e.id = ${build.evaluation_id}`;
    t.same(evaluation, { kind: 'direct', phase: 'building', task: 'direct', commit: null });
    const [derivation] = await kiln.sql<{ required_features: string[]; timeout_secs: number; input_srcs: string[] }[]>`
      select required_features, timeout_secs, input_srcs from derivations where drv_path = ${top.drvPath}`;
    t.same(derivation, { required_features: ['kvm', 'big-parallel'], timeout_secs: 60, input_srcs: [note.path] });

    // The scheduler's own query: the input is ready, the root waits for it.
    const ready = () => readyBuilds(kiln.sql, 100, new Date()).then((rows) => rows.map((r) => r.drv_path));
    t.same(await ready(), [dep.drvPath]);
    t.same((await kiln.sql`select db.inputs_remaining from derivation_builds db join derivations d on d.id = db.derivation_id where d.drv_path = ${top.drvPath}`)[0],
      { inputs_remaining: 1 }, 'the root counts its open input');
    // What a completion does (buildStatus.ts): the status, and the readiness counter of the builds above.
    await kiln.sql`update derivation_builds set status = 'completed' where derivation_id = (select id from derivations where drv_path = ${dep.drvPath})`;
    await kiln.sql`update derivation_builds set inputs_remaining = inputs_remaining - 1, ready = inputs_remaining - 1 = 0 where derivation_id = (select id from derivations where drv_path = ${top.drvPath})`;
    t.same(await ready(), [top.drvPath]);
    const [projects] = await readyBuilds(kiln.sql, 100, new Date());
    t.same(projects!.projects, [project!.id]);

    // Every path is signed into the cache, so a worker without the .drv substitutes it.
    for (const p of [note, dep, top] as ClosurePath[]) {
      const narinfo = await fetch(`${kiln.url}/cache/main/${p.path.slice(11, 43)}.narinfo`);
      t.equal(narinfo.status, 200, `${p.path} is in the cache`);
      t.match(await narinfo.text(), /Sig: /);
    }

    const recent = await kiln.api<BuildView[]>('GET', '/builds/direct/recent', { token: ada.token });
    t.same(recent.message.map((b) => b.build_id), [build.build_id]);
    t.same((await kiln.api<BuildView[]>('GET', '/builds/direct/recent', { token: bob.token })).message, []);
    t.equal((await kiln.api('GET', `/builds/${build.build_id}`, { token: bob.token })).status, 404, 'a stranger does not see it');
    t.equal((await kiln.api('GET', '/builds/direct/recent?limit=0', { token: ada.token })).status, 400);
    t.equal((await kiln.api('GET', '/builds/direct/recent?limit=x', { token: ada.token })).status, 400);
  });

  t.test('a root over a failed input fails at once; an all-done closure completes', async (t) => {
    const broken = syntheticDrv('kiln-broken');
    const above = syntheticDrv('kiln-above', { inputDrvs: [broken] });
    const first = await post(kiln, ada.token, [['project', project!.id], ['closure', exportStream([broken])]]);
    t.equal(first.status, 200, JSON.stringify(first.message));
    await kiln.sql`update derivation_builds set status = 'failed', failure_class = 'FailedPermanent' where id = ${(first.message as BuildView).derivation_build}`;
    const second = await post(kiln, ada.token, [['project', 'acme/app'], ['closure', exportStream([broken, above])], ['drv', above.drvPath]]);
    t.equal(second.status, 200, JSON.stringify(second.message));
    t.match(second.message, { status: 'failed', failure: { reason: 'dependency_failed' } });
    const [row] = await kiln.sql<{ phase: string }[]>`select phase from evaluations where id = ${(second.message as BuildView).evaluation_id}`;
    t.equal(row!.phase, 'completed');
    // The first evaluation's only build is final too, but only a scheduler pass or a new submission settles it.
    const again = await post(kiln, ada.token, [['project', 'acme/app'], ['closure', exportStream([broken])]]);
    const [third] = await kiln.sql<{ phase: string }[]>`select phase from evaluations where id = ${(again.message as BuildView).evaluation_id}`;
    t.equal(third!.phase, 'completed');
  });

  t.test('malformed requests are 4xx naming the problem', async (t) => {
    const forged = { ...dep, path: dep.path.replace(/^\/nix\/store\/./, (m) => m.slice(0, -1) + (m.endsWith('0') ? '1' : '0')) };
    const other = syntheticDrv('kiln-other');
    const cases: [string, [string, string | Buffer][], number, RegExp][] = [
      ['no project', [['closure', closure]], 400, /no project part/],
      ['no closure', [['project', 'acme/app']], 400, /no closure part/],
      ['empty closure', [['project', 'acme/app'], ['closure', Buffer.alloc(0)]], 400, /no closure part/],
      ['unknown part', [['project', 'acme/app'], ['closure', closure], ['colour', 'red']], 400, /unknown part "colour"/],
      ['two closures', [['project', 'acme/app'], ['closure', closure], ['closure', closure]], 400, /more than one closure/],
      ['garbage closure', [['project', 'acme/app'], ['closure', Buffer.from('not an export stream at all')]], 400, /export stream/],
      ['forged path', [['project', 'acme/app'], ['closure', exportStream([{ ...forged }])]], 400, /not content-addressed/],
      ['incomplete closure', [['project', 'acme/app'], ['closure', exportStream([dep, top])]], 400, /incomplete/],
      ['two roots', [['project', 'acme/app'], ['closure', exportStream([dep, other])]], 400, /2 root derivations/],
      ['drv not in closure', [['project', 'acme/app'], ['closure', closure], ['drv', other.drvPath]], 400, /not a derivation of the closure/],
      ['bad drv path', [['project', 'acme/app'], ['closure', closure], ['drv', '/tmp/x.drv']], 400, /drv:/],
      ['only sources', [['project', 'acme/app'], ['closure', exportStream([note])]], 400, /no \.drv/],
      ['unknown project', [['project', 'acme/nope'], ['closure', closure]], 404, /project/],
      ['no writable cache', [['project', 'acme/bare'], ['closure', closure]], 409, /writes into no cache/],
      ['cache not writable', [['project', 'acme/app'], ['closure', closure], ['cache', 'elsewhere']], 409, /does not write into a cache "elsewhere"/],
    ];
    for (const [label, fields, status, message] of cases) {
      const res = await post(kiln, ada.token, fields);
      t.equal(res.status, status, `${label}: ${JSON.stringify(res.message)}`);
      t.match(String(res.message), message, label);
    }
    const notMultipart = await post(kiln, ada.token, [['project', 'acme/app']], 'application/json');
    t.equal(notMultipart.status, 400);
    t.match(String(notMultipart.message), /multipart\/form-data/);
    t.equal((await post(kiln, null, [['project', 'acme/app'], ['closure', closure]])).status, 401);
    t.equal((await post(kiln, bob.token, [['project', 'acme/app'], ['closure', closure]])).status, 404, 'a stranger does not learn the project exists');
    const huge = await post(kiln, ada.token, [['project', 'acme/app'], ['closure', Buffer.alloc(20 * 1024 * 1024 + 1)]]);
    t.equal(huge.status, 413);
    t.match(String(huge.message), /20 MiB/);
    t.equal((await post(kiln, ada.token, [['project', 'acme/app'], ['closure', closure], ['cache', 'main']])).status, 200, 'naming the writable cache works');
    t.equal((await kiln.api('GET', '/health')).status, 200, 'the server keeps serving');
  });
});
