// The kiln client as users run it: a child process against a real server, real nix-build paths,
// and real Nix substituting what it uploaded; pins through the client, which waits out a 429.
import t from 'tap';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestKiln } from '../support/kiln.js';
import { kilnCli } from '../support/kilnCli.js';
import { signUp } from '../support/accounts.js';
import { nixPathInfo, nixStoreDump, requireNix } from '../support/nixStore.js';
import { freshStore, netrcFile, nixOk, runNix } from '../support/nixClient.js';

// A closure of three paths: top refers to middle, middle to bottom.
const CHAIN_NIX = String.raw`
let
  mk = name: script: derivation { inherit name; builder = "/bin/sh"; args = [ "-c" script ]; PATH = "/bin:/usr/bin"; system = builtins.currentSystem; };
  bottom = mk "kiln-cli-bottom" "mkdir $out; seq 1 20000 > $out/numbers";
  middle = mk "kiln-cli-middle" "mkdir $out; echo ${'${'}bottom} > $out/dep";
in mk "kiln-cli-top" "mkdir $out; echo ${'${'}middle} > $out/dep"
`;

t.test('kiln login and kiln cache … against a real server', async (t) => {
  requireNix();
  // The rate limiter's clock: still, unless a step is armed; then it moves on after the next take.
  let limiterNow = 1_700_000_000_000;
  let armedStepMs: number | null = null;
  let takesSinceArmed = 0;
  const rateLimitClock = {
    now: () => {
      takesSinceArmed++;
      const at = limiterNow;
      if (armedStepMs !== null) [limiterNow, armedStepMs] = [limiterNow + armedStepMs, null];
      return at;
    },
  };
  const kiln = await startTestKiln(t, {}, { rateLimitClock });
  const ada = await signUp(kiln, 'ada');
  const bob = await signUp(kiln, 'bob');
  await kiln.api('PUT', '/caches', { token: ada.token, body: { name: 'main' } });
  await kiln.api('PUT', '/caches', { token: ada.token, body: { name: 'other' } });
  const mainKey = (await kiln.api<string>('GET', '/caches/main/key', { token: ada.token })).message;
  const apiKey = (await kiln.api<{ secret: string }>('POST', '/user/keys', { token: ada.token, body: { name: 'ci', permissions: ['viewCache', 'writeStore', 'manageCache'] } })).message.secret;

  const dir = mkdtempSync(join(tmpdir(), 'kiln-cli-home-'));
  const env = { HOME: dir, XDG_CONFIG_HOME: join(dir, 'config') };
  writeFileSync(join(dir, 'chain.nix'), CHAIN_NIX);
  const top = (await nixOk('nix-build', [join(dir, 'chain.nix'), '--no-out-link'])).trim();
  const closure = (await nixOk('nix-store', ['--query', '--requisites', top])).trim().split('\n');
  const [bottom, middle] = ['kiln-cli-bottom', 'kiln-cli-middle'].map((n) => closure.find((p) => p.endsWith(n))!) as [string, string];
  t.equal(closure.length, 3);

  t.test('without a login: refused, saying how to log in', async (t) => {
    const run = await kilnCli(['cache', 'nar', 'list', 'main'], env);
    t.equal(run.status, 2);
    t.match(run.stderr, /kiln login --server URL --token TOKEN/);
  });

  t.test('login checks the token and writes the config file 0600', async (t) => {
    const wrong = await kilnCli(['login', '--server', kiln.url, '--token', 'SVCnot-a-key'], env);
    t.equal(wrong.status, 1);
    t.match(wrong.stderr, /^kiln: /);
    const bad = await kilnCli(['login', '--server', 'ftp://x', '--token', 'x', '--json'], env);
    t.equal(bad.status, 2);
    t.match(bad.json, { error: true, code: 'usage' });
    const run = await kilnCli(['login', '--server', `${kiln.url}/`, '--token', '-', '--json'], env, `${apiKey}\n`);
    t.equal(run.status, 0, run.stderr);
    const file = join(dir, 'config', 'kiln', 'config.json');
    t.same(run.json, { server: kiln.url, user: 'ada', config: file });
    t.equal(statSync(file).mode & 0o777, 0o600);
    t.same(JSON.parse(readFileSync(file, 'utf8')), { server: kiln.url, token: apiKey });
  });

  t.test('upload a closure: dependencies first; a second run skips everything', async (t) => {
    const run = await kilnCli(['cache', 'upload', '--json', top, 'main'], env);
    t.equal(run.status, 0, run.stderr);
    t.same(run.json, [bottom, middle, top].map((p) => ({ store_path: p, status: 'added', nar_size: nixPathInfo(p).narSize })));
    const again = await kilnCli(['cache', 'upload', top, 'main'], env);
    t.equal(again.status, 0);
    t.match(again.stdout, /0 uploaded \(0 B\), 3 already present/);
  });

  t.test('--no-closure uploads only the named path', async (t) => {
    const run = await kilnCli(['cache', 'upload', '--no-closure', '--json', middle, 'other'], env);
    t.equal(run.status, 0, run.stderr);
    t.same((run.json as { store_path: string }[]).map((o) => o.store_path), [middle]);
  });

  t.test('--nar-file with --narinfo', async (t) => {
    const narFile = join(dir, 'bottom.nar');
    writeFileSync(narFile, nixStoreDump(bottom));
    const info = nixPathInfo(bottom);
    const narinfo = join(dir, 'bottom.narinfo');
    writeFileSync(narinfo, `StorePath: ${bottom}\nURL: nar/x.nar\nCompression: none\nNarHash: ${info.narHash}\nNarSize: ${info.narSize}\nReferences: \n`);
    const run = await kilnCli(['cache', 'upload', '--json', '--nar-file', narFile, '--narinfo', narinfo, 'other'], env);
    t.equal(run.status, 0, run.stderr);
    t.match(run.json, [{ store_path: bottom, status: 'added' }]);
    writeFileSync(narinfo, `StorePath: ${bottom}\nURL: nar/x.nar\nNarHash: ${info.narHash}\nNarSize: 7\n`);
    const wrongSize = await kilnCli(['cache', 'upload', '--nar-file', narFile, '--narinfo', narinfo, 'other'], env);
    t.equal(wrongSize.status, 2);
    t.match(wrongSize.stderr, /has \d+ bytes, but the narinfo's NarSize is 7/);
    const extra = await kilnCli(['cache', 'upload', '--nar-file', narFile, '--narinfo', narinfo, top, 'other'], env);
    t.equal(extra.status, 2);
  });

  t.test('nar list, show, stats', async (t) => {
    const list = await kilnCli(['cache', 'nar', 'list', 'main', '--sort', 'nar_size', '--order', 'desc', '--json'], env);
    t.equal(list.status, 0, list.stderr);
    const page = list.json as { items: { store_path: string; nar_size: number }[]; total: number };
    t.equal(page.total, 3);
    t.equal(page.items[0]!.store_path, bottom, 'the biggest first');
    const human = await kilnCli(['cache', 'nar', 'list', 'main', '--package', 'middle'], env);
    t.match(human.stdout, /^HASH\s+NAME\s+NAR SIZE/);
    t.match(human.stdout, /kiln-cli-middle/);
    t.match(human.stdout, /page 1 of 1 \(1 path\)/);
    const tooMany = await kilnCli(['cache', 'nar', 'list', 'main', '--per-page', '500', '--json'], env);
    t.equal(tooMany.status, 1);
    t.match(tooMany.json, { error: true, code: 'invalid_query', message: /^per_page: / });
    const badSort = await kilnCli(['cache', 'nar', 'list', 'main', '--sort', 'size'], env);
    t.not(badSort.status, 0);
    t.match(badSort.stderr, /created_at, nar_size, last_fetched_at/);
    const show = await kilnCli(['cache', 'nar', 'show', 'main', top, '--json'], env);
    t.match(show.json, { store_path: top, caches: 1 });
    t.match((await kilnCli(['cache', 'nar', 'show', 'main', top], env)).stdout, /^StorePath:\s+\/nix\/store\//);
    const stats = await kilnCli(['cache', 'nar', 'stats', 'main', '--json'], env);
    t.match(stats.json, { cache: 'main', paths: 3, bytes_left: null });
    t.equal((await kilnCli(['cache', 'nar', 'show', 'main', 'not-a-hash'], env)).status, 2);
  });

  t.test('Nix substitutes what the client uploaded (private cache, netrc)', async (t) => {
    const store = freshStore();
    const copy = await runNix('nix', ['copy', '--from', `${kiln.url}/cache/main`, '--to', store, '--option', 'trusted-public-keys', mainKey, top], { netrc: netrcFile(ada.token) });
    t.equal(copy.status, 0, copy.stderr);
    const verify = await runNix('nix', ['store', 'verify', '--store', store, '--option', 'trusted-public-keys', mainKey, '-r', top]);
    t.equal(verify.status, 0, verify.stderr);
    const realise = await runNix('nix-store', ['--store', freshStore(), '-r', top, '--option', 'substituters', `${kiln.url}/cache/main`, '--option', 'trusted-public-keys', mainKey], { netrc: netrcFile(ada.token) });
    t.equal(realise.status, 0, realise.stderr);
  });

  t.test('delete: asks, refuses in JSON mode without --yes, deletes with it', async (t) => {
    const json = await kilnCli(['cache', 'nar', 'delete', 'main', top, '--json'], env);
    t.equal(json.status, 2);
    t.match(json.json, { error: true, code: 'confirmation_required' });
    const declined = await kilnCli(['cache', 'nar', 'delete', 'main', top], env, 'n\n');
    t.equal(declined.status, 2);
    t.match(declined.stderr, /Delete .* from cache "main"\? \[y\/N\]/);
    t.equal((await kiln.api<{ total: number }>('GET', '/caches/main/nars', { token: ada.token })).message.total, 3, 'nothing deleted yet');
    const accepted = await kilnCli(['cache', 'nar', 'delete', 'main', top], env, 'y\n');
    t.equal(accepted.status, 0, accepted.stderr);
    t.match(accepted.stdout, /deleted .*kiln-cli-top from cache "main"/);
    const yes = await kilnCli(['cache', 'nar', 'delete', 'main', middle, '-y', '--json'], env);
    t.equal(yes.status, 0, yes.stderr);
    t.match(yes.json, { store_path: middle, cache: 'main', last_copy: false });
    t.equal((await kiln.api<{ total: number }>('GET', '/caches/main/nars', { token: ada.token })).message.total, 1);
  });

  t.test('KILN_SERVER and KILN_TOKEN override the file', async (t) => {
    const asBob = await kilnCli(['cache', 'nar', 'stats', 'main', '--json'], { ...env, KILN_SERVER: kiln.url, KILN_TOKEN: bob.token });
    t.equal(asBob.status, 1);
    t.match(asBob.json, { error: true, code: 'not_found' }, 'bob cannot see ada\'s private cache');
    const nowhere = await kilnCli(['cache', 'list', '--json'], { HOME: mkdtempSync(join(tmpdir(), 'kiln-cli-empty-')), KILN_SERVER: kiln.url, KILN_TOKEN: ada.token });
    t.equal(nowhere.status, 0, 'no config file needed');
    t.same((nowhere.json as { name: string }[]).map((c) => c.name), ['main', 'other']);
    const key = await kilnCli(['cache', 'key', 'main'], env);
    t.equal(key.stdout.trim(), mainKey);
  });

  t.test('rotate-key: refuses a bad --overlap-hours, asks, rotates; keys lists both; again at once only with --force', async (t) => {
    const bad = await kilnCli(['cache', 'rotate-key', 'main', '--overlap-hours', 'soon', '--yes'], env);
    t.equal(bad.status, 2);
    t.match(bad.stderr, /--overlap-hours/);
    const unconfirmed = await kilnCli(['cache', 'rotate-key', 'main', '--json'], env);
    t.equal(unconfirmed.status, 2);
    t.match(unconfirmed.json, { error: true, code: 'confirmation_required' });
    const rotated = await kilnCli(['cache', 'rotate-key', 'main', '--overlap-hours', '12', '--yes', '--json'], env);
    t.equal(rotated.status, 0, rotated.stderr);
    t.match(rotated.json, { public_key: /-main-2:/, previous: { public_key: mainKey } });
    const keys = await kilnCli(['cache', 'keys', 'main'], env);
    t.equal(keys.status, 0, keys.stderr);
    t.ok(keys.stdout.includes(`Previous:  ${mainKey}`), keys.stdout);
    t.match(keys.stdout, /Current: {3}\S+-main-2:/);
    // cache.keyRotationMinIntervalSecs (3600 s by default): again at once only with --force
    const soon = await kilnCli(['cache', 'rotate-key', 'main', '--yes', '--json'], env);
    t.equal(soon.status, 1);
    t.match(soon.json, { error: true, code: 'key_rotation_too_soon' });
    const forced = await kilnCli(['cache', 'rotate-key', 'main', '--force', '--overlap-hours', '12', '--yes', '--json'], env);
    t.equal(forced.status, 0, forced.stderr);
    t.match(forced.json, { public_key: /-main-3:/, previous: { public_key: /-main-2:/ } });
  });

  t.test('pin, pins a page at a time, unpin; an empty pin-write bucket is waited out', async (t) => {
    // The closure again (delete above took some of it away).
    t.equal((await kilnCli(['cache', 'upload', top, 'main'], env)).status, 0);
    const pinned = await kilnCli(['cache', 'pin', 'main', middle, bottom, '--json'], env);
    t.equal(pinned.status, 0, pinned.stdout);
    t.match(pinned.json, [{ store_path: middle, expires_at: null }, { store_path: bottom }]);
    const page = await kilnCli(['cache', 'pins', 'main', '--page', '2', '--per-page', '1', '--json'], env);
    t.equal(page.status, 0, page.stderr);
    t.match(page.json, { page: 2, per_page: 1, total: 2 });
    t.equal((page.json as { pins: unknown[] }).pins.length, 1, 'one pin on the second page of one');
    const text = await kilnCli(['cache', 'pins', 'main', '--per-page', '1'], env);
    t.match(text.stdout, /page 1 of 2 \(2 pins\)/);
    const tooLarge = await kilnCli(['cache', 'pins', 'main', '--per-page', '500', '--json'], env);
    t.equal(tooLarge.status, 1);
    t.match(tooLarge.json, { error: true, code: 'invalid_query' });

    // ada's session drains ada's bucket (the CLI's key is ada's too).
    let drained = 0;
    while ((await kiln.api('DELETE', `/caches/main/pins/${'1'.repeat(32)}`, { token: ada.token })).status === 404) drained++;
    t.ok(drained < 300, `the bucket ran dry after ${drained} more writes`);
    // The CLI's first DELETE is refused (Retry-After: 1); the clock then moves a refill on.
    armedStepMs = 200;
    takesSinceArmed = 0;
    const unpinned = await kilnCli(['cache', 'unpin', 'main', middle, '--json'], env);
    t.equal(unpinned.status, 0, unpinned.stderr);
    t.equal(takesSinceArmed, 2, 'refused once, then waited and tried again');
    t.same((await kiln.sql`select hash_part from cache_pins`).map((r) => r['hash_part']), [bottom.slice(11, 43)], 'only bottom is still pinned');
  });
});
