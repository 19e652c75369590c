import t from 'tap';
import {
  isStorePathHashPart,
  parseStorePath,
  parseStorePathBaseName,
  printStorePath,
  storePathBaseName,
  storePathHashPart,
  storePathName,
  storePathNameProblem,
} from '../../../protocol/nix/index.js';
import { buildFixturePaths } from '../../support/nixStore.js';

const HASH = '2wgwwrzq33820k7hi44rfakjcgd5cyrc';

t.test('real store paths parse and print back', async (t) => {
  for (const path of Object.values(buildFixturePaths())) {
    const parsed = parseStorePath(path);
    if (!parsed.ok) throw new Error(parsed.reason);
    t.equal(printStorePath(parsed.value), path);
    t.equal(parsed.value.hashPart, path.slice(11, 43));
    t.ok(isStorePathHashPart(parsed.value.hashPart));
    t.equal(storePathBaseName(parsed.value), path.slice(11));
  }
});

t.test('the store directory is configurable', async (t) => {
  const parsed = parseStorePath(`/gnu/store/${HASH}-hello-2.12`, '/gnu/store');
  t.same(parsed, { ok: true, value: { storeDir: '/gnu/store', hashPart: HASH, name: 'hello-2.12' } });
  t.match(parseStorePath(`/nix/store/${HASH}-hello`, '/gnu/store'), { ok: false, reason: /not in the store directory \/gnu\/store/ });
});

t.test('names follow Nix: allowed characters, 1 to 211 long', async (t) => {
  t.equal(storePathNameProblem('hello-2.12+x_y?z=w'), undefined);
  t.equal(storePathNameProblem('a'.repeat(211)), undefined);
  t.match(storePathNameProblem('a'.repeat(212)), /212 characters long \(at most 211\)/);
  t.match(storePathNameProblem(''), /empty/);
  t.match(storePathNameProblem('hello world'), /contains " "/);
  t.match(storePathNameProblem('héllo'), /contains "é"/);
  t.match(storePathNameProblem('..'), /the name is "\.\."/);
});

t.test('bad store paths say what is wrong', async (t) => {
  const cases: [string, RegExp][] = [
    [`/nix/store/${HASH}`, /expected "<32 nix32 characters>-<name>"/],
    [`/nix/store/${HASH}-`, /expected "<32 nix32 characters>-<name>"/],
    [`/nix/store/${HASH.slice(1)}-hello`, /expected "<32 nix32/],
    [`/nix/store/e${HASH.slice(1)}-hello`, /outside nix32/],
    [`/nix/store/${HASH}-hello/bin/hello`, /a path inside a store path/],
    [`/nix/store/${HASH}-hel/lo`, /a path inside a store path/],
    [`/tmp/${HASH}-hello`, /not in the store directory/],
    [`/nix/store/${HASH}-a${'b'.repeat(211)}`, /at most 211/],
  ];
  for (const [path, reason] of cases) t.match(parseStorePath(path), { ok: false, field: 'storePath', reason }, path);
  t.match(parseStorePathBaseName('short', undefined, 'References'), { ok: false, field: 'References' });
  t.notOk(isStorePathHashPart('e'.repeat(32)));
  t.notOk(isStorePathHashPart(HASH.slice(1)));
});

t.test('the hash part and name of a parsed path, from a full path or a base name', async (t) => {
  for (const path of [`/nix/store/${HASH}-hello-2.12`, `/gnu/store/${HASH}-hello-2.12`, `${HASH}-hello-2.12`]) {
    t.equal(storePathHashPart(path), HASH, path);
    t.equal(storePathName(path), 'hello-2.12', path);
  }
  t.equal(storePathName(`/nix/store/${HASH}-a-b-c`), 'a-b-c', 'a name keeps its own dashes');
});

t.test('malformed input never yields a hash part', async (t) => {
  const malformed = ['', '/', '/nix/store/', '/nix/store/short-hello', `/nix/store/${HASH}-hello/`, `/nix/store/${HASH.slice(2)}-x`];
  for (const text of malformed) {
    t.notOk(isStorePathHashPart(storePathHashPart(text)), JSON.stringify(text));
    t.equal(storePathName(text), '', `${JSON.stringify(text)} has no name`);
  }
  t.equal(storePathHashPart(`/nix/store/${HASH}-hello/bin/hello`), 'hello', 'a path inside a store path gives its last segment, not the hash');
});
