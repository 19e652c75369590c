// What a narinfo says belongs to each cache's copy (DESIGN.md, "Every tenant may be hostile";
// migration 0017): one cache's upload of a NAR under a false name, without its references or with a
// made-up deriver never changes what another cache serves, and a cache re-uploading the same NAR
// with another narinfo replaces its own copy only. The blob stays shared by FileHash.
import t, { type Test } from 'tap';
import { parseNarinfo, verifyNarinfo, type Narinfo } from '../../../protocol/index.js';
import { narBlobKey } from '../../../storage/index.js';
import { blobKeys, makeTestNar, openTestNarStorage, type TestNarStorage } from '../../support/narStorage.js';

type Cache = Awaited<ReturnType<TestNarStorage['cache']>>;

async function upload(s: TestNarStorage, cache: Cache, nar: Buffer, info: Narinfo) {
  const staged = await s.nars.uploads.stageTemporary((async function* () {
    yield nar;
  })());
  return s.nars.uploads.ingestFile({ cacheId: cache.id, signingKey: cache.key, info, file: staged.file, compression: 'none' });
}

async function servedNarinfo(s: TestNarStorage, cache: Cache, hash: string): Promise<Narinfo> {
  const text = await s.nars.reads.narinfo(cache.id, hash);
  if (text === null) throw new Error(`cache ${cache.id} serves no narinfo for ${hash}`);
  const parsed = parseNarinfo(text.toString());
  if (!parsed.ok) throw new Error(`unparsable narinfo: ${parsed.reason}`);
  return parsed.value;
}

t.test('narinfo poisoning across caches', async (t) => {
  const s = await openTestNarStorage(t, 'fs');
  const victim = await s.cache('victim');
  const attacker = await s.cache('attacker');
  const dependency = await makeTestNar(t, { lib: 'a library\n' }, [], 'dependency');

  /** The attack: the attacker uploads first what it likes to say about the NAR, the victim then the truth. */
  const attack = async (t: Test, lie: (real: Narinfo) => Narinfo) => {
    const real = await makeTestNar(t, { bin: `uses ${dependency.info.storePath}\n${t.name}\n` }, [`${dependency.hash}-dependency`], 'real-name');
    real.info = { ...real.info, deriver: `${'1'.repeat(32)}-real-name.drv` };
    const attackerCopy = await upload(s, attacker, real.nar, lie(real.info));
    t.equal(attackerCopy.status, 'added');
    const blobsBefore = await blobKeys(s.blobs);
    const victimCopy = await upload(s, victim, real.nar, real.info);
    t.equal(victimCopy.status, 'added');
    t.equal(victimCopy.fileHash, attackerCopy.fileHash, 'one blob for both copies');
    t.same(await blobKeys(s.blobs), blobsBefore, 'nothing stored twice');

    const served = await servedNarinfo(s, victim, real.hash);
    t.equal(served.storePath, real.info.storePath, "the victim's StorePath");
    t.same(served.references, real.info.references, "the victim's References");
    t.equal(served.deriver, real.info.deriver, "the victim's Deriver");
    t.equal(served.ca, real.info.ca);
    t.ok(verifyNarinfo(served, [victim.key.publicKey]), "the victim's Sig verifies over what the victim serves");
    const attackers = await servedNarinfo(s, attacker, real.hash);
    t.same({ storePath: attackers.storePath, references: attackers.references, deriver: attackers.deriver }, (({ storePath, references, deriver }) => ({ storePath, references, deriver }))(lie(real.info)), 'the attacker serves its own lie, to itself');
    return real;
  };

  t.test('a false name', (t) => attack(t, (real) => ({ ...real, storePath: real.storePath.replace('real-name', 'evil-name') })).then(() => undefined));
  t.test('no references', (t) => attack(t, (real) => ({ ...real, references: [] })).then(() => undefined));
  t.test('a fake deriver', (t) => attack(t, (real) => ({ ...real, deriver: `${'2'.repeat(32)}-evil.drv` })).then(() => undefined));
  t.test('a content address', (t) => attack(t, (real) => ({ ...real, ca: 'fixed:r:sha256:1b8m03r63zqhnjf7l5wnldhh7c134ap5vpj0850ymkq1iyzicy5s' })).then(() => undefined));

  t.test('deleting and uploading again gives the victim its own narinfo, not the one left behind', async (t) => {
    const real = await attack(t, (info) => ({ ...info, references: [] }));
    const removal = await s.sql.begin((tx) => s.nars.removePathFromCache(tx, victim.id, real.hash));
    t.same({ removed: removal.removed, lastCopy: removal.lastCopy }, { removed: true, lastCopy: false }, 'not the last copy: the attacker still holds the NAR (under its own narinfo)');
    await s.nars.settleRemoval(removal);
    t.equal(await s.nars.reads.narinfo(victim.id, real.hash), null);
    t.same((await servedNarinfo(s, attacker, real.hash)).references, [], "the attacker's copy is the attacker's");
    t.ok(await s.blobs.stat(narBlobKey((await upload(s, victim, real.nar, real.info)).fileHash)), 'the shared blob stayed');
    t.same((await servedNarinfo(s, victim, real.hash)).references, real.info.references);

    const fromAttacker = await s.sql.begin((tx) => s.nars.removePathFromCache(tx, attacker.id, real.hash));
    t.equal(fromAttacker.lastCopy, false, 'the victim still holds it');
    await s.nars.settleRemoval(fromAttacker);
    t.same((await servedNarinfo(s, victim, real.hash)).references, real.info.references, "the attacker's delete leaves the victim's copy alone");
    const last = await s.sql.begin((tx) => s.nars.removePathFromCache(tx, victim.id, real.hash));
    t.equal(last.lastCopy, true);
    await s.nars.settleRemoval(last);
    t.equal(await s.blobs.stat(narBlobKey(last.fileHash!)), null, 'the last copy takes the blob with it');
  });

  t.test("a cache's own re-upload with another narinfo replaces its copy, at once, and nobody else's", async (t) => {
    const nar = await makeTestNar(t, { bin: `uses ${dependency.info.storePath}\n` }, [`${dependency.hash}-dependency`], 'replaced');
    const other = await s.cache(`other-${Date.now()}`);
    await upload(s, other, nar.nar, nar.info);
    const wrong = { ...nar.info, references: [] };
    t.equal((await upload(s, victim, nar.nar, wrong)).status, 'added');
    t.same((await servedNarinfo(s, victim, nar.hash)).references, [], 'served (and now in memory)');
    const fixed = await upload(s, victim, nar.nar, nar.info);
    t.equal(fixed.status, 'added', 'a new narinfo, not a repeat');
    const served = await servedNarinfo(s, victim, nar.hash);
    t.same(served.references, nar.info.references, 'the new copy shows at once, not the one in memory');
    t.ok(verifyNarinfo(served, [victim.key.publicKey]));
    t.equal((await upload(s, victim, nar.nar, nar.info)).status, 'held', 'the same narinfo again is a repeat');
    const rows = await s.sql<{ refs: string[] }[]>`select refs from cached_paths where hash_part = ${nar.hash}`;
    t.same(rows.map((r) => r.refs), [nar.info.references], 'the replaced copy went (one row, shared with the cache that says the same)');
    t.same((await servedNarinfo(s, other, nar.hash)).references, nar.info.references, "the other cache's copy is untouched");
    const different = await makeTestNar(t, { bin: 'another NAR\n' });
    await t.rejects(upload(s, victim, different.nar, { ...different.info, storePath: nar.info.storePath }), { name: 'UploadProblem', message: /already holds/ }, 'another NAR of the path still needs a delete first');
  });
});
