// GET /cache/{cache}/log/{drv} serves the build logs kiln stored itself (issue 25, item 5): a
// derivation whose output the cache holds, with the NarHash of the copy in a cache the building
// project writes to, gets its log, so real `nix log --store <cache> <drv>` prints it; a cache
// without any of its outputs, one holding a forged path of the same name (another tenant's upload),
// or a malformed name, is a 404 (Nix moves on) unless the caller may see the build itself.
import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { netrcFile, nixOk, runNix } from '../../support/nixClient.js';
import { finalize, localNar, putChunk, uploadInfo } from '../../support/narUploads.js';

t.test('nix log against a kiln cache', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  const logs = await createTestCache(kiln.sql, 'logs', { public: true, ownerId: ada.id });
  await createTestCache(kiln.sql, 'other', { public: true, ownerId: ada.id });
  await createTestCache(kiln.sql, 'mirror', { public: true, ownerId: ada.id });
  // ada's private project acme/app writes its outputs to logs.
  await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } });
  await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'app', repository: 'file:///nonexistent' } });
  const [project] = await kiln.sql<{ id: string }[]>`select id from projects where name = 'app'`;
  await kiln.sql`insert into subscriptions (project_id, cache_id, mode) values (${project!.id}, ${logs.id}, 0)`;
  const [task] = await kiln.sql<{ id: string }[]>`select id from tasks where project_id = ${project!.id} and name = 'default'`;
  const [evaluation] = await kiln.sql<{ id: string }[]>`
    insert into evaluations (task_id, repository, wildcard, phase) values (${task!.id}, 'file:///nonexistent', '*', 'completed') returning id`;
  // mallory, a tenant with a public cache of her own.
  const mallory = await signUp(kiln, 'mallory');
  await createTestCache(kiln.sql, 'evil', { public: true, ownerId: mallory.id });
  const dir = mkdtempSync(join(tmpdir(), 'kiln-log-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  // A fresh derivation each run, so the store path is new and kiln's rows are its own.
  writeFileSync(join(dir, 'default.nix'), `derivation { name = "kiln-log-${process.pid}-${Date.now()}"; system = builtins.currentSystem; builder = "/bin/sh"; args = [ "-c" "echo built > $out" ]; }`);
  const drv = (await nixOk('nix', ['eval', '--raw', '--file', join(dir, 'default.nix'), 'drvPath'])).trim();
  const out = (await nixOk('nix-store', ['--realise', drv])).trim();
  // nix log reads the .drv from the store it asks, so the cache holds the derivation and its output.
  const netrc = netrcFile(ada.token);
  await nixOk('nix', ['copy', '--to', `${kiln.url}/cache/logs`, out], { netrc });
  await nixOk('nix', ['copy', '--derivation', '--to', `${kiln.url}/cache/logs`, drv], { netrc });
  // a faithful copy elsewhere (same NarHash), and mallory's forgery: other bytes under the output's name.
  await nixOk('nix', ['copy', '--to', `${kiln.url}/cache/mirror`, out], { netrc });
  writeFileSync(join(dir, 'forged.nix'), `derivation { name = "kiln-forged-${process.pid}-${Date.now()}"; system = builtins.currentSystem; builder = "/bin/sh"; args = [ "-c" "echo forged > $out" ]; }`);
  const forgedDrv = (await nixOk('nix', ['eval', '--raw', '--file', join(dir, 'forged.nix'), 'drvPath'])).trim();
  const forged = localNar((await nixOk('nix-store', ['--realise', forgedDrv])).trim());
  const outHash = out.slice('/nix/store/'.length, '/nix/store/'.length + 32);
  t.equal((await putChunk(kiln, mallory.token, 'evil', outHash, 0, forged.nar)).status, 200);
  const forgery = await finalize(kiln, mallory.token, 'evil', outHash, { ...uploadInfo(forged.info), store_path: out, references: [] });
  t.equal(forgery.status, 200, 'kiln takes the forged upload (an input-addressed path is not checked against its content)');

  // kiln's own record of that build and its stored log (what a worker's /proto log stream leaves).
  const [derivation] = await kiln.sql<{ id: string }[]>`
    insert into derivations (drv_path, name, system, outputs) values (${drv}, 'kiln-log', 'x86_64-linux', ${kiln.sql.json({ out })}) returning id`;
  const [build] = await kiln.sql<{ id: string }[]>`
    insert into derivation_builds (derivation_id, status, attempts) values (${derivation!.id}, 'completed', 2) returning id`;
  await kiln.sql`insert into builds (evaluation_id, derivation_build_id, entry_point, attr) values (${evaluation!.id}, ${build!.id}, true, 'packages.x86_64-linux.default')`;
  await kiln.sql`insert into build_log_chunks (derivation_build_id, attempt, seq, data) values
    (${build!.id}, 1, 0, ${Buffer.from('first attempt\n')}),
    (${build!.id}, 2, 0, ${Buffer.from('building kiln-log\n')}), (${build!.id}, 2, 1, ${Buffer.from('done\n')})`;
  const base = drv.slice(drv.lastIndexOf('/') + 1);

  t.test('the cache holding its output serves the latest attempt\'s log, and nix log prints it', async (t) => {
    const res = await fetch(`${kiln.url}/cache/logs/log/${base}`);
    t.equal(res.status, 200);
    t.match(res.headers.get('content-type'), /^text\/plain/);
    t.equal(await res.text(), 'building kiln-log\ndone\n');
    const info = await fetch(`${kiln.url}/cache/logs/${base.slice(0, 32)}.narinfo`);
    t.equal(info.status, 200, 'the .drv is in the cache');
    const printed = await nixOk('nix', ['log', '--store', `${kiln.url}/cache/logs`, drv]);
    t.equal(printed, 'building kiln-log\ndone\n');
  });

  t.test('a cache without any of its outputs does not reveal the log', async (t) => {
    t.equal((await fetch(`${kiln.url}/cache/other/log/${base}`)).status, 404);
    const run = await runNix('nix', ['log', '--store', `${kiln.url}/cache/other`, drv]);
    t.not(run.status, 0);
    t.notMatch(run.stdout, /building kiln-log/);
  });

  t.test('a copy with the same NarHash in a cache the project does not write to serves the log', async (t) => {
    const res = await fetch(`${kiln.url}/cache/mirror/log/${base}`);
    t.equal(res.status, 200);
    t.equal(await res.text(), 'building kiln-log\ndone\n');
  });

  t.test('a forged path named like the output does not reveal the log of a private build', async (t) => {
    const info = await fetch(`${kiln.url}/cache/evil/${outHash}.narinfo`);
    t.equal(info.status, 200, 'evil serves a path named like the output');
    t.equal((await fetch(`${kiln.url}/cache/evil/log/${base}`)).status, 404, 'anonymous');
    const asMallory = { headers: { authorization: `Basic ${Buffer.from(`mallory:${mallory.token}`).toString('base64')}` } };
    t.equal((await fetch(`${kiln.url}/cache/evil/log/${base}`, asMallory)).status, 404, 'mallory');
    const asAda = { headers: { authorization: `Basic ${Buffer.from(`ada:${ada.token}`).toString('base64')}` } };
    const res = await fetch(`${kiln.url}/cache/evil/log/${base}`, asAda);
    t.equal(res.status, 200, 'ada may see the build, so any cache she reads answers her');
    t.equal(await res.text(), 'building kiln-log\ndone\n');
  });

  t.test('a viewer of the build gets its log with real nix log from a cache without its outputs', async (t) => {
    // "other" holds the .drv (nix log reads it from the store it asks) but none of its outputs
    await nixOk('nix', ['copy', '--derivation', '--to', `${kiln.url}/cache/other`, drv], { netrc });
    const anonymous = await runNix('nix', ['log', '--store', `${kiln.url}/cache/other`, drv]);
    t.not(anonymous.status, 0, 'a caller who may not see the build gets nothing');
    t.notMatch(anonymous.stdout, /building kiln-log/);
    const malloryRun = await runNix('nix', ['log', '--store', `${kiln.url}/cache/other`, drv], { netrc: netrcFile(mallory.token, 'mallory') });
    t.not(malloryRun.status, 0, 'nor another tenant');
    const printed = await nixOk('nix', ['log', '--store', `${kiln.url}/cache/other`, drv], { netrc });
    t.equal(printed, 'building kiln-log\ndone\n', 'ada, who may see the build, reads its log');
  });

  t.test('malformed or unknown derivation names are 404s', async (t) => {
    for (const name of ['x.drv', `${base.slice(0, -4)}`, '..%2F..%2Fetc%2Fpasswd', `${'0'.repeat(32)}-unknown.drv`]) {
      t.equal((await fetch(`${kiln.url}/cache/logs/log/${name}`)).status, 404, name);
    }
  });
});
