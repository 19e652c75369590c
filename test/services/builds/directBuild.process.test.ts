// A direct build end to end with real Nix: a derivation (with an input derivation, a source and a
// toFile text) is instantiated here, its closure exported and POSTed to /builds; a real
// `kiln worker` builds both derivations and pushes the outputs into the project's cache.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { startTestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { spawnWorker } from '../../support/workerProcess.js';
import { nixEnv, requireNix } from '../../support/nixStore.js';
import { multipartBody } from '../../support/directClosure.js';
import { eventually } from '../../support/eventually.js';

requireNix();

interface Build { build_id: string; evaluation_id: string; drv_path: string; status: string; outputs: Record<string, string>; failure: unknown }

t.test('POST /builds → a real worker builds the derivation and its input', { timeout: 180_000 }, async (t) => {
  const kiln = await startTestKiln(t, { localWorker: true });
  const work = mkdtempSync(join(tmpdir(), 'kiln-direct-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));
  const nonce = randomBytes(8).toString('hex');
  writeFileSync(join(work, 'script.sh'), `echo script ${nonce}\n`);
  writeFileSync(join(work, 'd.nix'), `let
    mk = name: script: extra: derivation ({ inherit name; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" script ]; PATH = "/bin:/usr/bin"; } // extra);
    dep = mk "kiln-direct-dep" "echo building dep; echo ${nonce} > $out" { };
    src = builtins.path { path = ./script.sh; name = "kiln-direct-script"; };
    note = builtins.toFile "kiln-direct-note" "note for \${src}";
  in mk "kiln-direct-top" "echo building top; cat \${dep} \${src} \${note} > $out" { }`);
  const env = nixEnv();
  const drv = execFileSync('nix-instantiate', [join(work, 'd.nix')], { env }).toString().trim();
  const closure = execFileSync('nix-store', ['-qR', drv], { env }).toString().trim().split('\n');
  const exported = execFileSync('nix-store', ['--export', ...closure], { env, maxBuffer: 1 << 26 });

  const { token } = await signUp(kiln, 'ada');
  t.equal((await kiln.api('PUT', '/orgs', { token, body: { name: 'acme' } })).status, 200);
  t.equal((await kiln.api('PUT', '/projects/acme', { token, body: { name: 'app', repository: 'file:///nonexistent' } })).status, 200);
  const [project] = await kiln.sql<{ id: string }[]>`select id from projects where name = 'app'`;
  const cache = await createTestCache(kiln.sql, 'main', { public: true });
  await kiln.sql`insert into subscriptions (project_id, cache_id, mode) values (${project!.id}, ${cache.id}, 0)`;

  const worker = spawnWorker({ serverUrl: `ws://127.0.0.1:${kiln.port}/proto`, baseDir: join(work, 'worker') });
  t.teardown(() => worker.stop());

  const { body, contentType } = multipartBody([['project', 'acme/app'], ['closure', exported]]);
  const res = await fetch(`${kiln.url}/api/v1/builds`, { method: 'POST', body, headers: { 'content-type': contentType, authorization: `Bearer ${token}` } });
  const submitted = (await res.json()) as { message: Build };
  t.equal(res.status, 200, JSON.stringify(submitted.message));
  t.equal(submitted.message.drv_path, drv);

  const build = await eventually(async () => (await kiln.api<Build>('GET', `/builds/${submitted.message.build_id}`, { token })).message,
    { until: (b) => ['completed', 'failed', 'substituted'].includes(b.status), timeout: 120_000, interval: 200, message: 'the build ends' });
  t.equal(build.status, 'completed', JSON.stringify(build.failure));
  // The evaluation finishes in the scheduler's next batch of outcomes, a moment after its last build.
  type Evaluation = { phase: string; builds: { total: number; completed: number } };
  const evaluation = await eventually(async () => (await kiln.api<Evaluation>('GET', `/evals/${build.evaluation_id}`, { token })).message,
    { until: (e) => e.phase !== 'building', timeout: 30_000, interval: 200, message: 'the evaluation leaves building' });
  t.match(evaluation,
 { phase: 'completed', builds: { total: 2, completed: 2 } });
  const out = build.outputs['out']!;
  const narinfo = await fetch(`${kiln.url}/cache/main/${out.slice(11, 43)}.narinfo`);
  t.equal(narinfo.status, 200, 'the output is in the cache');
  const log = await fetch(`${kiln.url}/api/v1/builds/${build.build_id}/log`, { headers: { authorization: `Bearer ${token}` } });
  t.match(await log.text(), /building top/);
  const recent = await kiln.api<Build[]>('GET', '/builds/direct/recent', { token });
  t.same(recent.message.map((b) => b.build_id), [build.build_id]);
});
