// `kiln push` and `kiln watch-store` with real Nix (issue 25 item 4): `nix build --option
// post-build-hook <script running kiln push --from-hook>` queues each build's outputs; a running
// watch-store pushes them into the cache; one killed with SIGKILL loses nothing: paths built while
// it was down wait in the queue, and the next watcher uploads those, never again the ones already
// done. SIGTERM ends a watcher with its summary; a refused cache stops it with the queue intact.
// The store scan (the default): a path Nix registers after the watcher started reaches the cache
// without any hook; one killed with SIGKILL, then paths built while it is down, then a restart:
// every path there, each uploaded once (counted server-side by a trigger on staged_uploads).
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { startTestKiln } from '../support/kiln.js';
import { signUp } from '../support/accounts.js';
import { requireNix } from '../support/nixStore.js';
import { nixOk } from '../support/nixClient.js';
import { eventually } from '../support/eventually.js';
import { kilnCli, type CliRun } from '../support/kilnCli.js';

requireNix();

const bin = fileURLToPath(new URL('../../bin/kiln.js', import.meta.url));

t.test('kiln push and watch-store', { timeout: 240_000 }, async (t) => {
  const kiln = await startTestKiln(t);
  const work = mkdtempSync(join(tmpdir(), 'kiln-push-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));
  const ada = await signUp(kiln, 'ada');
  await kiln.api('PUT', '/caches', { token: ada.token, body: { name: 'main' } });
  const env = { HOME: work, KILN_SERVER: kiln.url, KILN_TOKEN: ada.token };
  const queue = join(work, 'queue');
  const hook = join(work, 'hook.sh');
  // what the docs show for nix.conf's post-build-hook, with this checkout's kiln
  writeFileSync(hook, `#!/bin/sh\nexec ${process.execPath} ${bin} push --from-hook main --queue ${queue}\n`);
  chmodSync(hook, 0o755);

  const nonce = randomBytes(6).toString('hex');
  /** Builds a fresh derivation with the hook; its output path. */
  const build = async (name: string) => {
    const file = join(work, `${name}.nix`);
    writeFileSync(file, `derivation { name = "kiln-push-${name}"; system = builtins.currentSystem; builder = "/bin/sh"; args = [ "-c" "echo ${name} ${nonce} > $out" ]; }`);
    const out = (await nixOk('nix', ['eval', '--raw', '--file', file, 'outPath'])).trim();
    await nixOk('nix', ['build', '--no-link', '--file', file, '--option', 'post-build-hook', hook]);
    return out;
  };
  const basic = { authorization: `Basic ${Buffer.from(`ada:${ada.token}`).toString('base64')}` };
  const cached = async (path: string) => (await fetch(`${kiln.url}/cache/main/${path.slice(11, 43)}.narinfo`, { headers: basic })).status === 200;

  /** watch-store as a child of its own, so it can be killed outright. */
  const watcher = (args: string[] = ['--no-scan']) => {
    const child = spawn(process.execPath, [bin, 'watch-store', 'main', '--queue', queue, '--interval-ms', '100', ...args], {
      env: { PATH: process.env['PATH'] ?? '', NIX_REMOTE: 'local', ...env }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const done = new Promise<CliRun>((resolve) => child.on('close', (code, signal) => {
      let json: unknown = null;
      try {
        json = JSON.parse(stdout);
      } catch {
        // not JSON
      }
      resolve({ status: code ?? (signal ? 128 : -1), stdout, stderr, json });
    }));
    return { child, done, stderr: () => stderr };
  };

  let first = '';
  await t.test('a path built after the watcher started reaches the cache', async (t) => {
    const running = watcher();
    try {
      first = await build('one');
      t.match(readFileSync(queue, 'utf8'), /\.drv!\*\n$/, 'the hook queued the build (Nix 2.8 hands it no OUT_PATHS, only DRV_PATH)');
      const started = Date.now();
      await eventually(() => cached(first), { timeout: 30_000, interval: 100, message: 'the output reaches the cache' });
      t.comment(`in the cache ${Date.now() - started} ms after the build ended`);
      // the narinfo answers before the watcher has recorded the path done: killed earlier, the next
      // watcher would find it again (present, so skipped) and subtest 2 would count it
      const drained = () => existsSync(`${queue}.offset`) && readFileSync(`${queue}.offset`, 'utf8').trim() === String(readFileSync(queue).length);
      await eventually(drained, { timeout: 30_000, interval: 50, message: 'the watcher records the path done' });
    } finally {
      running.child.kill('SIGKILL');
      await running.done;
    }
    t.match(running.stderr(), `uploaded ${first}`);
  });

  await t.test('paths built while no watcher runs wait; the next one uploads them and nothing twice', async (t) => {
    const two = await build('two');
    const three = await build('three');
    t.notOk(await cached(two), 'nothing pushes while the watcher is down');
    const next = watcher(['--no-scan', '--once', '--json']);
    const run = await next.done;
    t.equal(run.status, 0, run.stderr);
    const outcomes = run.json as { store_path: string; status: string }[];
    t.same(outcomes.map((o) => [o.store_path, o.status]), [[two, 'added'], [three, 'added']], 'only the new paths, each once');
    t.ok(await cached(two));
    t.ok(await cached(three));
    t.equal(readFileSync(`${queue}.offset`, 'utf8').trim(), String(readFileSync(queue).length), 'the queue is done to its end');
  });

  await t.test('SIGTERM ends a watcher with its summary', async (t) => {
    const running = watcher();
    await eventually(() => /watching/.test(running.stderr()), { interval: 50, message: 'the watcher starts' });
    running.child.kill('SIGTERM');
    const run = await running.done;
    t.equal(run.status, 0, run.stderr);
    t.match(run.stdout, /^0 uploaded \(0 B\), 0 already present$/m);
  });

  await t.test('kiln push uploads now; a present path is skipped', async (t) => {
    const run = await kilnCli(['push', 'main', first, '--json'], env);
    t.equal(run.status, 0, run.stderr);
    t.match(run.json, [{ store_path: first, status: 'skipped' }]);
    const usage = await kilnCli(['push', 'main'], env);
    t.equal(usage.status, 2);
  });

  await t.test('the hook refuses what is not a store path; a refused cache stops the watcher with the queue intact', async (t) => {
    const bad = await kilnCli(['push', '--from-hook', 'main', '--queue', queue], { ...env, OUT_PATHS: '/etc/passwd' });
    t.equal(bad.status, 1);
    t.match(bad.stderr, /is not a store path/);
    const four = await build('four');
    const refused = await kilnCli(['watch-store', 'nope', '--queue', queue, '--once', '--no-scan'], env);
    t.equal(refused.status, 1);
    t.notOk(await cached(four));
    const drained = await kilnCli(['watch-store', 'main', '--queue', queue, '--once', '--json', '--no-scan'], env);
    t.match(drained.json, [{ store_path: four, status: 'added' }]);
    t.ok(existsSync(queue));
  });

  await t.test('the store scan: new paths without a hook, none lost or uploaded twice across a kill -9', async (t) => {
    // every upload session the server begins, by the store path's hash part
    await kiln.sql.unsafe(`create table test_upload_starts (upload_key text not null);
      create function test_log_upload() returns trigger language plpgsql as $$ begin insert into test_upload_starts values (new.upload_key); return new; end $$;
      create trigger test_log_upload after insert on staged_uploads for each row execute function test_log_upload()`);
    const scanQueue = join(work, 'scan-queue');
    /** Builds without the hook: only the scan can find it. */
    const plainBuild = async (name: string) => {
      const file = join(work, `${name}.nix`);
      writeFileSync(file, `derivation { name = "kiln-scan-${name}"; system = builtins.currentSystem; builder = "/bin/sh"; args = [ "-c" "echo ${name} ${nonce} > $out" ]; }`);
      const out = (await nixOk('nix', ['eval', '--raw', '--file', file, 'outPath'])).trim();
      await nixOk('nix', ['build', '--no-link', '--file', file]);
      return out;
    };
    const scanning = () => watcher(['--queue', scanQueue]);
    const first = scanning();
    const built: string[] = [];
    try {
      await eventually(() => existsSync(`${scanQueue}.scan`), { interval: 50, message: 'the watcher records its starting position' });
      built.push(await plainBuild('s1'));
      const started = Date.now();
      await eventually(() => cached(built[0]!), { timeout: 60_000, interval: 100, message: 'the scanned path reaches the cache' });
      t.comment(`scanned path in the cache ${Date.now() - started} ms after the build ended`);
    } finally {
      first.child.kill('SIGKILL');
      await first.done;
    }
    built.push(await plainBuild('s2'), await plainBuild('s3'));
    t.notOk(await cached(built[1]!), 'nothing pushes while the watcher is down');
    const second = scanning();
    try {
      for (const path of built) await eventually(() => cached(path), { timeout: 60_000, interval: 100, message: `${path} reaches the cache` });
    } finally {
      second.child.kill('SIGKILL');
      await second.done;
    }
    const starts = await kiln.sql.unsafe<{ upload_key: string; n: number }[]>('select upload_key, count(*)::int as n from test_upload_starts group by upload_key');
    const counts = new Map(starts.map((r) => [r.upload_key, r.n]));
    for (const path of built) t.equal(counts.get(path.slice(11, 43)), 1, `${path} uploaded once`);
    t.same(starts.filter((r) => r.n > 1), [], 'no path uploaded twice (the scan also finds other builds on this machine)');
    t.notOk(readFileSync(scanQueue, 'utf8').includes('.drv\n'), 'derivations are not queued');
  });
});
