// A small NAR ingested from memory (prepareBytes; `nix copy --to ssh-ng://`'s AddMultipleToStore)
// stores the very bytes the staged-file ingest stores, and passes the same checks: NarHash,
// NarSize, references, a NAR that does not parse. Both sides of the inline threshold are covered
// (on the event loop up to 256 KiB, in the CPU pool above).
import t from 'tap';
import { isUploadProblem, type PreparedIngest } from '../../../storage/index.js';
import { makeTestNar, openTestNarStorage, type TestNar } from '../../support/narStorage.js';

t.test('ingest of a NAR in memory', async (t) => {
  const s = await openTestNarStorage(t, 'fs');
  const main = await s.cache('main');
  const fromFile = async (nar: TestNar): Promise<PreparedIngest> => {
    const staged = await s.nars.uploads.stageTemporary((async function* () {
      yield nar.nar;
    })());
    return s.nars.uploads.prepareFile({ cacheId: main.id, signingKey: main.key, info: nar.info, file: staged.file, compression: 'none' });
  };
  const fromBytes = (nar: TestNar, info = nar.info, bytes: Uint8Array = nar.nar) =>
    s.nars.uploads.prepareBytes({ cacheId: main.id, signingKey: main.key, info, nar: bytes });
  const refusal = async (work: Promise<unknown>): Promise<string> => {
    try {
      await work;
      return 'accepted';
    } catch (e) {
      return isUploadProblem(e) ? `${e.kind}: ${e.message}` : `not an upload problem: ${String(e)}`;
    }
  };

  const dependency = await makeTestNar(t, { data: 'a dependency\n' }, [], 'dependency');
  const small = await makeTestNar(t, { data: `small ${dependency.info.storePath}\n` }, [`${dependency.hash}-dependency`], 'small');
  const large = await makeTestNar(t, { data: Buffer.alloc(600 * 1024, 'large\n'), nested: 'x' }, [], 'large');
  t.ok(large.nar.byteLength > 256 * 1024, 'one NAR takes the CPU pool');

  t.test('the same stored file and checked values as from a staged file', async (t) => {
    for (const nar of [small, large]) {
      const a = await fromFile(nar);
      const b = await fromBytes(nar);
      if (!('commit' in a) || !('commit' in b)) throw new Error('expected two commits');
      const { zstdFile: fileA, signature: _a, ...restA } = a.commit;
      const { zstdFile: fileB, signature: _b, ...restB } = b.commit;
      t.same(restB, restA, `${nar.info.storePath}: FileHash, FileSize, listing, NarHash and references agree`);
      t.not(fileA, fileB);
      await s.nars.uploads.discardPrepared(a);
      const outcomes = await s.nars.uploads.commitPrepared([b]);
      t.equal(outcomes[0]!.status, 'fulfilled', `${nar.info.storePath} is stored`);
      t.ok(await s.nars.reads.narinfo(main.id, nar.hash), `${nar.info.storePath} is served`);
    }
  });

  t.test('the checks', async (t) => {
    const other = await makeTestNar(t, { data: 'other\n' }, [], 'checked');
    t.match(await refusal(fromBytes(other, { ...other.info, narHash: small.info.narHash })), /^nar_mismatch: NarHash: /, 'a wrong NarHash');
    t.match(await refusal(fromBytes(other, { ...other.info, narSize: other.info.narSize + 1 })), /^nar_mismatch: .*NarSize/, 'bytes fewer than the NarSize');
    t.match(await refusal(fromBytes(other, { ...other.info, narSize: other.info.narSize - 1 })), /^nar_mismatch: .*longer than the announced/, 'bytes more than the NarSize');
    t.match(await refusal(fromBytes(other, { ...other.info, references: [`${dependency.hash}-dependency`] })), /^nar_mismatch: References: /, 'a reference the NAR does not hold');
    const garbage = Buffer.from(other.nar);
    garbage.write('nix-archive-9', 8);
    t.match(await refusal(fromBytes(other, other.info, garbage)), /^invalid_nar: /, 'a NAR that does not parse');
    const big = await makeTestNar(t, { data: Buffer.alloc(400 * 1024, 'big\n') }, [], 'big');
    t.match(await refusal(fromBytes(big, { ...big.info, narHash: small.info.narHash })), /^nar_mismatch: NarHash: /, 'a wrong NarHash (in the pool)');
    const bigGarbage = Buffer.from(big.nar);
    bigGarbage.write('nix-archive-9', 8);
    t.match(await refusal(fromBytes(big, big.info, bigGarbage)), /^invalid_nar: /, 'a NAR that does not parse (in the pool)');
    for (const nar of [other, big]) t.equal(await s.nars.reads.narinfo(main.id, nar.hash), null, `nothing of ${nar.info.storePath} is stored`);
  });
});
