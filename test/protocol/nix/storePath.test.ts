import t from 'tap';
import {
  isStorePathHashPart,
  parseStorePath,
  parseStorePathBaseName,
  printStorePath,
  storePathBaseName,
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
