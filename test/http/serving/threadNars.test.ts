// A serving thread's NAR grants (http/serving/threadNars.ts): kept for the access TTL, keyed by the
// lower-cased cache name, dropped for every spelling by an access change and for the one cache by
// a delete of the file's path; every invalidation bumps the generation, so grants asked for before
// it are not used.
import t from 'tap';
import { isNarFileName } from '../../../http/serving/narFileName.js';
import { NarGrants } from '../../../http/serving/threadNarGrants.js';
import { ACCESS_TTL_MS } from '../../../http/serving/threadHotCache.js';

const FILE = '0'.repeat(52);
const OTHER = '1'.repeat(52);
/** as the URL names them */
const name = (fileHash: string) => `${fileHash}.nar.zst`;
const grant = (cacheId: string, fileHash = FILE) => ({ cacheId, cache: 'Pub', fileHash, fileSize: 10, path: `/blobs/nar/${fileHash}.nar.zst` });

t.test('a grant lives for the access TTL', async (t) => {
  let now = 1_000;
  const grants = new NarGrants(() => now);
  grants.keep('pub', grant('c1'));
  t.equal(grants.get('pub', name(FILE))?.fileSize, 10);
  t.equal(grants.get('pub', name(OTHER)), undefined, 'only the file granted');
  t.equal(grants.get('other', name(FILE)), undefined, 'only under the cache granted');
  now += ACCESS_TTL_MS;
  t.equal(grants.get('pub', name(FILE)), undefined, 'then the main thread is asked again');
});

t.test('an access change in any spelling drops the cache’s grants', async (t) => {
  for (const spelling of ['pub', 'PUB', 'Pub']) {
    const grants = new NarGrants(() => 1_000);
    grants.keep('pub', grant('c1'));
    grants.keep('pub', grant('c1', OTHER));
    grants.keep('priv', grant('c2'));
    const before = grants.generation;
    grants.forgetCache(spelling);
    t.equal(grants.get('pub', name(FILE)), undefined, `${spelling}: dropped`);
    t.equal(grants.get('pub', name(OTHER)), undefined, `${spelling}: every file of it`);
    t.equal(grants.get('priv', name(FILE))?.cacheId, 'c2', `${spelling}: another cache keeps its grant`);
    t.ok(grants.generation > before, 'asks under way are not used');
  }
});

t.test('a deleted path drops its file in its cache only', async (t) => {
  const grants = new NarGrants(() => 1_000);
  grants.keep('pub', grant('c1'));
  grants.keep('other', grant('c2'));
  const before = grants.generation;
  grants.forgetFile('c1', FILE);
  t.equal(grants.get('pub', name(FILE)), undefined);
  t.equal(grants.get('other', name(FILE))?.cacheId, 'c2', 'the same file in another cache stays');
  t.ok(grants.generation > before);
});

t.test('one file granted by two caches: each cache keeps and loses its own grant', async (t) => {
  const grants = new NarGrants(() => 1_000);
  grants.keep('pub', grant('c1'));
  grants.keep('other', grant('c2'));
  t.equal(grants.get('pub', name(FILE))?.cacheId, 'c1');
  t.equal(grants.get('other', name(FILE))?.cacheId, 'c2');
  grants.keep('pub', grant('c1'));
  t.equal(grants.get('other', name(FILE))?.cacheId, 'c2', 'renewing one cache\'s grant leaves the other\'s');
  grants.forgetCache('PUB');
  t.equal(grants.get('pub', name(FILE)), undefined);
  t.equal(grants.get('other', name(FILE))?.cacheId, 'c2');
  grants.forgetFile('c2', FILE);
  t.equal(grants.get('other', name(FILE)), undefined);
});

t.test('a NAR file name is 52 base-32 characters and .nar.zst, nothing else', async (t) => {
  t.ok(isNarFileName(name('0a'.repeat(26))));
  for (const bad of ['', name('0'.repeat(51)), name('0'.repeat(53)), `${'0'.repeat(52)}.nar.xz`, `${'0'.repeat(52)}.nar.zsT`, name(`${'0'.repeat(51)}A`),
    name(`${'0'.repeat(51)}/`), name(`${'0'.repeat(51)}{`), name(`${'0'.repeat(51)}-`), `${'0'.repeat(52)}xnar.zst`, `../${'0'.repeat(49)}.nar.zst`]) {
    t.notOk(isNarFileName(bad), JSON.stringify(bad));
  }
});

t.test('grants are bounded (65,536, oldest file out), counted per cache and file', async (t) => {
  const grants = new NarGrants(() => 1_000);
  const hash = (i: number) => i.toString(32).padStart(52, '0');
  // the first file granted by two caches: two of the bound
  grants.keep('a', grant('ca', hash(0)));
  grants.keep('b', grant('cb', hash(0)));
  for (let i = 1; i < 65_535; i++) grants.keep('a', grant('ca', hash(i)));
  t.ok(grants.get('a', name(hash(0))) && grants.get('b', name(hash(0))), 'at the bound: everything kept');
  grants.keep('a', grant('ca', hash(1))); // renewed: no new entry
  t.ok(grants.get('b', name(hash(0))), 'a renewal adds nothing');
  grants.keep('a', grant('ca', hash(65_535)));
  t.equal(grants.get('b', name(hash(0))), undefined, 'past it, the oldest file goes, with every cache\'s grant of it');
  t.ok(grants.get('a', name(hash(1))) && grants.get('a', name(hash(65_535))), 'the renewed and the newest stay');
});
