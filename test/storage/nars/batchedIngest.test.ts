// Batched ingest (prepareFile, then commitPrepared; `nix copy --to ssh-ng://`'s AddMultipleToStore):
// the paths of a batch are committed in one transaction, and a path refused at the commit fails
// alone: the others are stored (their blobs too, though the failed transaction had moved them into
// the blob store already) and nothing is left of the refused one.
import t from 'tap';
import { readdir } from 'node:fs/promises';
import { narBlobKey, type PreparedIngest } from '../../../storage/index.js';
import { makeTestNar, openTestNarStorage, type TestNar } from '../../support/narStorage.js';

t.test('batched ingest', async (t) => {
  const s = await openTestNarStorage(t, 'fs');
  const main = await s.cache('main');
  const prepare = async (nar: TestNar, info = nar.info): Promise<PreparedIngest> => {
    const staged = await s.nars.uploads.stageTemporary((async function* () {
      yield nar.nar;
    })());
    return s.nars.uploads.prepareFile({ cacheId: main.id, signingKey: main.key, info, file: staged.file, compression: 'none' });
  };
  const transactionsOf = async (paths: string[]) =>
    new Set((await s.sql<{ xmin: string }[]>`select xmin::text from cached_paths where store_path in ${s.sql(paths)}`).map((r) => r.xmin)).size;

  t.test('a batch commits in one transaction', async (t) => {
    const nars = await Promise.all([1, 2, 3, 4].map((n) => makeTestNar(t, { data: `batch ${n}\n`.repeat(n * 100) }, [], `batch-${n}`)));
    const prepared = [];
    for (const nar of nars) prepared.push(await prepare(nar));
    const outcomes = await s.nars.uploads.commitPrepared(prepared);
    t.same(outcomes.map((o) => o.status === 'fulfilled' && o.value.status), ['added', 'added', 'added', 'added']);
    t.equal(await transactionsOf(nars.map((n) => n.info.storePath)), 1, 'every row was written by one transaction');
    for (const nar of nars) t.ok(await s.nars.reads.narinfo(main.id, nar.hash), `${nar.info.storePath} is served`);

    const again = await s.nars.uploads.commitPrepared([await prepare(nars[0]!)]);
    t.same(again.map((o) => o.status === 'fulfilled' && o.value.status), ['held'], 'a held path is held');
  });

  t.test('a path refused at the commit fails alone', async (t) => {
    const before = await makeTestNar(t, { data: 'before\n' }, [], 'before');
    const contested = await makeTestNar(t, { data: 'ours\n' }, [], 'contested');
    const after = await makeTestNar(t, { data: 'after\n' }, [], 'after');
    const prepared = [await prepare(before), await prepare(contested), await prepare(after)];
    // Meanwhile another upload stores a different NAR under the contested path.
    const theirs = await makeTestNar(t, { data: 'theirs\n' }, [], 'contested');
    const theirInfo = { ...theirs.info, storePath: contested.info.storePath };
    const committed = await s.nars.uploads.commitPrepared([await prepare(theirs, theirInfo)]);
    t.equal(committed[0]!.status, 'fulfilled');

    const outcomes = await s.nars.uploads.commitPrepared(prepared);
    t.equal(outcomes[0]!.status, 'fulfilled', 'the path before is stored');
    t.equal(outcomes[2]!.status, 'fulfilled', 'the path after is stored');
    const refused = outcomes[1]!;
    t.equal(refused.status, 'rejected');
    if (refused.status === 'rejected') t.match(String(refused.reason), /already holds another NAR/);
    for (const outcome of [outcomes[0]!, outcomes[2]!]) {
      if (outcome.status !== 'fulfilled') continue;
      t.ok(await s.blobs.stat(narBlobKey(outcome.value.fileHash)), `${outcome.value.storePath}: its blob is there`);
    }
    const served = await s.nars.reads.narinfo(main.id, contested.hash);
    t.match(served?.toString() ?? '', theirs.info.narHash, 'the contested path keeps the NAR stored first');
    const [row] = await s.sql<{ n: string }[]>`select count(*) as n from cached_paths where nar_hash = ${contested.info.narHash}`;
    t.equal(Number(row!.n), 0, 'nothing of the refused NAR was recorded');
  });

  t.test('a prepared ingest thrown away leaves no file', async (t) => {
    const nar = await makeTestNar(t, { data: 'dropped\n' }, [], 'dropped');
    const prepared = await prepare(nar);
    t.ok('commit' in prepared);
    await s.nars.uploads.discardPrepared(prepared);
    if ('commit' in prepared) t.notOk((await readdir(prepared.commit.zstdFile.replace(/\/[^/]+$/, ''))).includes(prepared.commit.zstdFile.replace(/^.*\//, '')));
    t.equal(await s.nars.reads.narinfo(main.id, nar.hash), null);
  });
});
