// The CI path end to end with real Nix: a flake in a git repository made here, evaluated and
// built by a real `kiln worker` process, outputs pushed over /proto into the subscribed cache and
// substituted from it by `nix copy --from` into a fresh store with signature checks.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { startTestKiln, type TestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { createFlakeRepo, shellFlake } from '../../support/flakeRepo.js';
import { spawnWorker } from '../../support/workerProcess.js';
import { requireNix } from '../../support/nixStore.js';
import { freshStore, nixOk, runNix } from '../../support/nixClient.js';
import { eventually } from '../../support/eventually.js';

requireNix();

const flake = (nonce: string) => shellFlake(nonce, `      base = mk "kiln-flow-base" "echo building base; mkdir $out; echo base > $out/data";
      app = mk "kiln-flow-app" "echo building app; mkdir -p $out/nix-support; cat \${base}/data > $out/copied; echo \${base} > $out/base-path; echo file binary-dist $out/copied > $out/nix-support/hydra-build-products";
      broken = mk "kiln-flow-broken" "echo about to fail; exit 3";`);

interface Evaluation { id: string; phase: string; error: string | null; builds: { total: number; completed: number; failed: number; substituted: number } }
interface Build { build_id: string; drv_path: string; status: string; attr: string | null; entry_point: boolean; failure: { class: string } | null; outputs: Record<string, string> }
interface EntryPoint { build_id: string; attr: string; outputs: { out: string }; build_status: string }

/** Polls the evaluation until it reaches a final phase, for most of the test's own timeout. */
async function settled(kiln: TestKiln, token: string, id: string): Promise<Evaluation> {
  return eventually(async () => {
    const got = await kiln.api<Evaluation>('GET', `/evals/${id}`, { token });
    if (got.error) throw new Error(`GET /evals/${id}: ${String(got.message)}`);
    return got.message;
  }, { until: (e) => ['completed', 'failed', 'aborted'].includes(e.phase), timeout: 0.75 * Number(process.env['KILN_FLOW_TIMEOUT'] ?? 120_000), interval: 200, message: `evaluation ${id} ends` });
}

t.test('evaluate → build on a real worker → substitute from the cache', { timeout: Number(process.env["KILN_FLOW_TIMEOUT"] ?? 120_000) }, async (t) => {
  const kiln = await startTestKiln(t, { localWorker: true, 'build.retryBackoffSecs': 0 });
  const work = mkdtempSync(join(tmpdir(), 'kiln-flow-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));
  const repo = createFlakeRepo(join(work, 'repo'), { 'flake.nix': flake(randomBytes(8).toString('hex')) });

  const { token } = await signUp(kiln, 'ada');
  const orgMade = await kiln.api('PUT', '/orgs', { token, body: { name: 'acme' } });
  t.equal(orgMade.status, 200, String(orgMade.message));
  const made = await kiln.api('PUT', '/projects/acme', { token, body: { name: 'app', repository: repo.url, wildcard: 'packages.x86_64-linux.*' } });
  t.equal(made.status, 200, String(made.message));
  const [project] = await kiln.sql<{ id: string }[]>`select id from projects where name = 'app'`;
  const cache = await createTestCache(kiln.sql, 'main', { public: true });

  // Without a writable cache the evaluation waits; the subscription releases it.
  const first = await kiln.api<string>('POST', '/projects/acme/app/evaluate', { token });
  if (first.status !== 200) throw new Error(`evaluate: ${String(first.message)}`);
  const evaluationId = first.message;

  const worker = spawnWorker({ serverUrl: `ws://127.0.0.1:${kiln.port}/proto`, baseDir: join(work, 'worker') });
  t.teardown(() => {
    if (process.env['KILN_FLOW_DEBUG']) console.error(JSON.stringify(worker.logs.slice(-30), null, 1), worker.stderr());
    return worker.stop();
  });
  await eventually(async () => {
    const got = await kiln.api<Evaluation>('GET', `/evals/${evaluationId}`, { token });
    if (got.error) throw new Error(`GET /evals: ${String(got.message)}`);
    return got.message;
  }, { until: (e) => e.phase === 'waiting', timeout: 60_000, interval: 100, message: 'the evaluation waits for a writable cache' });
  await kiln.sql`insert into subscriptions (project_id, cache_id, mode) values (${project!.id}, ${cache.id}, 0)`;

  const done = await settled(kiln, token, evaluationId);
  t.equal(done.phase, 'completed', done.error ?? '');
  t.match(done.builds, { total: 3, completed: 2, failed: 1 });

  const builds = (await kiln.api<Build[]>('GET', `/evals/${evaluationId}/builds`, { token })).message;
  const byName = (name: string) => builds.find((b) => b.drv_path.endsWith(`-kiln-flow-${name}.drv`))!;
  t.equal(byName('base').status, 'completed');
  t.equal(byName('app').status, 'completed');
  t.equal(byName('broken').status, 'failed');
  t.equal(byName('broken').failure?.class, 'FailedPermanent');

  const entryPoints = (await kiln.api<EntryPoint[]>('GET', '/projects/acme/app/entry-points', { token })).message;
  t.same(entryPoints.map((e) => [e.attr, e.build_status]), [
    ['packages.x86_64-linux.app', 'completed'], ['packages.x86_64-linux.base', 'completed'], ['packages.x86_64-linux.broken', 'failed'],
  ]);
  const appOut = entryPoints[0]!.outputs.out;
  t.match(appOut, /^\/nix\/store\/[0-9a-z]{32}-kiln-flow-app$/);

  const log = await fetch(`${kiln.url}/api/v1/builds/${byName('app').build_id}/log`, { headers: { authorization: `Bearer ${token}` } });
  t.match(await log.text(), /building app/);
  const brokenLog = await fetch(`${kiln.url}/api/v1/builds/${byName('broken').build_id}/log`, { headers: { authorization: `Bearer ${token}` } });
  t.match(await brokenLog.text(), /about to fail/);
  const deps = (await kiln.api<Build[]>('GET', `/builds/${byName('app').build_id}/dependencies`, { token })).message;
  t.same(deps.map((d) => d.build_id), [byName('base').build_id]);

  // Build data (docs/builds.md): graph, closures with the real references, products, all logs as NDJSON.
  const app = byName('app').build_id;
  const graph = (await kiln.api<{ nodes: { build_id: string }[]; edges: unknown[] }>('GET', `/builds/${app}/graph`, { token })).message;
  t.same([graph.nodes.length, graph.edges], [2, [{ source: byName('base').build_id, target: app }]]);
  const buildTime = (await kiln.api<{ node_count: number; truncated: boolean }>('GET', `/builds/${app}/closure`, { token })).message;
  t.same([buildTime.node_count, buildTime.truncated], [2, false]);
  const runtime = (await kiln.api<{ nodes: { path: string; nar_size: number }[]; edges: unknown[]; total_size_bytes: number }>('GET', `/builds/${app}/runtime-closure`, { token })).message;
  t.same(runtime.nodes.map((n) => n.path).sort(), [byName('app').outputs['out'], byName('base').outputs['out']].sort(), 'app refers to base');
  t.equal(runtime.total_size_bytes, runtime.nodes.reduce((sum, n) => sum + n.nar_size, 0));
  // Finishing each build recorded its outputs' NAR size (migration 0052): the build-time view totals those.
  const recorded = (await kiln.api<{ total_size_bytes: number }>('GET', `/builds/${app}/closure`, { token })).message;
  t.equal(recorded.total_size_bytes, runtime.total_size_bytes, 'the sizes recorded when app and base finished are those the cache holds');
  const products = (await kiln.api<{ filename: string }[]>('GET', `/builds/${app}/downloads`, { token })).message;
  t.same(products.map((p) => p.filename), ['copied']);
  const copied = await fetch(`${kiln.url}/api/v1/builds/${app}/download/copied`, { headers: { authorization: `Bearer ${token}` } });
  t.equal(await copied.text(), 'base\n');
  const allLogs = await fetch(`${kiln.url}/api/v1/evals/${evaluationId}/builds`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
  t.match(await allLogs.text(), /"log":"[^"]*building app/);

  const found = await kiln.api<{ outputs: { out: string } }>('GET', `/tasks/${project!.id}/default/evaluations?commit=${repo.commit}&attr=packages.x86_64-linux.app`, { token });
  t.equal(found.message.outputs.out, appOut);

  // Substituted by a Nix client from the cache, signatures checked.
  const store = freshStore();
  const trust = ['--option', 'trusted-public-keys', cache.publicKey];
  await nixOk('nix', ['copy', '--from', `${kiln.url}/cache/main`, '--to', store, ...trust, appOut]);
  const verified = await runNix('nix', ['store', 'verify', '--store', store, '--sigs-needed', '1', ...trust, appOut]);
  t.equal(verified.status, 0, verified.stderr);

  // A second evaluation of the same commit builds nothing: the shared builds are already done.
  const again = await kiln.api<string>('POST', `/tasks/${project!.id}/default/evaluate`, { token, body: { commit: repo.commit } });
  t.equal(again.status, 200, String(again.message));
  const second = await settled(kiln, token, again.message);
  t.equal(second.phase, 'completed');
  t.match(second.builds, { total: 3, completed: 2, failed: 1 });

  const aborted = await kiln.api('POST', `/evals/${evaluationId}`, { token, body: { method: 'abort' } });
  t.equal(aborted.code, 'evaluation_finished');
});
