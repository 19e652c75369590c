// What one tenant can try against another through the public API and real Nix (issue 15; DESIGN.md,
// "Every tenant may be hostile"). One server for the file; each attack is a subtest of its own, with
// its own caches, that shows the attack refused or harmless. Add attacks as further subtests.
import t, { type Test } from 'tap';
import { startTestKiln, type TestKiln } from '../support/kiln.js';
import { signUp, type TestAccount } from '../support/accounts.js';
import { createTestCache, type TestCache } from '../support/caches.js';
import { buildFixturePaths } from '../support/nixStore.js';
import { localNar, uploadInfo, uploadSingle, type LocalNar } from '../support/narUploads.js';
import { freshStore, netrcFile, nixOk, runNix } from '../support/nixClient.js';

const basic = (token: string) => ({ authorization: `Basic ${Buffer.from(`kiln:${token}`).toString('base64')}` });

async function narinfoText(kiln: TestKiln, who: TestAccount, cache: string, hash: string): Promise<string> {
  const res = await fetch(`${kiln.url}/cache/${cache}/${hash}.narinfo`, { headers: basic(who.token) });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`GET ${cache}/${hash}.narinfo: ${res.status} ${text}`);
  return text;
}

const field = (narinfo: string, name: string): string | undefined => new RegExp(`^${name}: (.*)$`, 'm').exec(narinfo)?.[1];
const baseName = (path: string) => path.slice(path.lastIndexOf('/') + 1);

t.test('multi-tenant attacks', async (t) => {
  const kiln = await startTestKiln(t);
  const victim = await signUp(kiln, 'victim');
  const attacker = await signUp(kiln, 'attacker');
  const fixtures = buildFixturePaths();
  // refs refers to file and to itself: the lies below have something to leave out.
  const closure = [fixtures.file, fixtures.refs];
  const victimNetrc = netrcFile(victim.token);

  /** Substitutes the closure from the victim's cache into an empty store, trusting only its key, and verifies it. */
  const substitutes = async (t: Test, cache: TestCache) => {
    const store = freshStore();
    const trust = ['--option', 'trusted-public-keys', cache.publicKey];
    const copied = await runNix('nix', ['copy', '--from', `${kiln.url}/cache/${cache.name}`, '--to', store, ...trust, ...closure], { netrc: victimNetrc });
    t.equal(copied.status, 0, `nix copy --from the victim's cache succeeds:\n${copied.stderr}`);
    const verified = await runNix('nix', ['store', 'verify', '--store', store, ...trust, ...closure]);
    t.equal(verified.status, 0, `nix store verify passes:\n${verified.stderr}`);
  };

  /** What the victim's cache says about each path is what the victim's store says. */
  const servesTheTruth = async (t: Test, cache: TestCache) => {
    for (const path of closure) {
      const { info, hash } = localNar(path);
      const text = await narinfoText(kiln, victim, cache.name, hash);
      t.equal(field(text, 'StorePath'), path, `${baseName(path)}: the real StorePath`);
      t.same(field(text, 'References')?.split(' ').filter((r) => r !== '').sort(), info.references.map(baseName).sort(), `${baseName(path)}: the real References`);
      t.equal(field(text, 'Deriver'), info.deriver === undefined ? undefined : baseName(info.deriver), `${baseName(path)}: the real Deriver`);
    }
  };

  t.test('narinfo poisoning across caches', async (t) => {
    // Every lie at once about each path: another name, no references, a deriver of the attacker's.
    const lieAbout = (nar: LocalNar) => ({
      storePath: `/nix/store/${nar.hash}-evil`,
      references: [] as string[],
      deriver: `/nix/store/${'0'.repeat(32)}-evil.drv`,
    });
    /** The attacker's cache serves the lie (the attack did reach storage); the name is the tell. */
    const attackerServesTheLie = async (t: Test, cache: string) => {
      for (const path of closure) {
        const text = await narinfoText(kiln, attacker, cache, localNar(path).hash);
        t.match(field(text, 'StorePath'), /-evil$/, `the attacker's own cache says what it uploaded about ${baseName(path)}`);
      }
    };

    t.test('uploaded first by REST, then by the victim by REST', async (t) => {
      await createTestCache(kiln.sql, 'attacker-rest', { ownerId: attacker.id });
      const mine = await createTestCache(kiln.sql, 'victim-rest', { ownerId: victim.id });
      for (const path of closure) {
        const nar = localNar(path);
        const lie = lieAbout(nar);
        const res = await uploadSingle(kiln, attacker.token, 'attacker-rest', {
          narinfo: { ...uploadInfo(nar.info), store_path: lie.storePath, references: lie.references, deriver: lie.deriver }, nar: nar.nar,
        });
        t.equal(res.status, 200, `the attacker's upload of ${baseName(path)} into its own cache: ${JSON.stringify(res.body)}`);
      }
      await attackerServesTheLie(t, 'attacker-rest');
      for (const path of closure) {
        const nar = localNar(path);
        const res = await uploadSingle(kiln, victim.token, 'victim-rest', { narinfo: uploadInfo(nar.info), nar: nar.nar });
        t.equal(res.status, 200, JSON.stringify(res.body));
      }
      await servesTheTruth(t, mine);
      await substitutes(t, mine);
    });

    t.test('uploaded first by the Nix PUT protocol, then by the victim with nix copy --to', async (t) => {
      await createTestCache(kiln.sql, 'attacker-nix', { ownerId: attacker.id });
      const mine = await createTestCache(kiln.sql, 'victim-nix', { ownerId: victim.id });
      for (const path of closure) {
        const nar = localNar(path);
        const lie = lieAbout(nar);
        const narHash = (await nixOk('nix-store', ['--query', '--hash', path])).trim();
        const put = await fetch(`${kiln.url}/cache/attacker-nix/nar/${nar.hash}.nar`, { method: 'PUT', headers: basic(attacker.token), body: nar.nar });
        t.equal(put.status, 200, await put.text());
        const narinfo = [
          `StorePath: ${lie.storePath}`, `URL: nar/${nar.hash}.nar`, 'Compression: none', `NarHash: ${narHash}`, `NarSize: ${nar.nar.length}`,
          `References: ${lie.references.join(' ')}`, `Deriver: ${baseName(lie.deriver)}`, '',
        ].join('\n');
        const res = await fetch(`${kiln.url}/cache/attacker-nix/${nar.hash}.narinfo`, { method: 'PUT', headers: basic(attacker.token), body: narinfo });
        t.equal(res.status, 200, `the attacker's narinfo PUT of ${baseName(path)}: ${await res.text()}`);
      }
      await attackerServesTheLie(t, 'attacker-nix');
      await nixOk('nix', ['copy', '--to', `${kiln.url}/cache/victim-nix`, ...closure], { netrc: victimNetrc });
      await servesTheTruth(t, mine);
      await substitutes(t, mine);
    });

    t.test('uploaded after the victim: what the victim serves does not change', async (t) => {
      const mine = await createTestCache(kiln.sql, 'victim-before', { ownerId: victim.id });
      await createTestCache(kiln.sql, 'attacker-after', { ownerId: attacker.id });
      await nixOk('nix', ['copy', '--to', `${kiln.url}/cache/victim-before`, ...closure], { netrc: victimNetrc });
      const before = await Promise.all(closure.map((path) => narinfoText(kiln, victim, 'victim-before', localNar(path).hash)));
      for (const path of closure) {
        const nar = localNar(path);
        const lie = lieAbout(nar);
        const res = await uploadSingle(kiln, attacker.token, 'attacker-after', {
          narinfo: { ...uploadInfo(nar.info), store_path: lie.storePath, references: lie.references, deriver: lie.deriver }, nar: nar.nar,
        });
        t.equal(res.status, 200, JSON.stringify(res.body));
      }
      await attackerServesTheLie(t, 'attacker-after');
      t.same(await Promise.all(closure.map((path) => narinfoText(kiln, victim, 'victim-before', localNar(path).hash))), before, 'byte for byte');
      await substitutes(t, mine);
    });
  });
});
