// debugBuildIds: which files of a NAR listing are debug info by build ID, exactly as Nix's
// index-debug-info picks them (lib/debug/.build-id/<2 hex>/<38 hex>.debug, regular files only).
import t from 'tap';
import { debugBuildIds, parseNarListing, type NarListing } from '../../../protocol/index.js';

const file = { type: 'regular', size: 1, narOffset: 0 };
const listing = (buildIdDir: unknown): NarListing => {
  const parsed = parseNarListing(JSON.stringify({ version: 1, root: { type: 'directory', entries: { lib: { type: 'directory', entries: { debug: { type: 'directory', entries: { '.build-id': buildIdDir } } } } } } }));
  if (!parsed.ok) throw new Error(parsed.reason);
  return parsed.value;
};
const rest = '0123456789abcdef0123456789abcdef012345';

t.test('well-formed entries give their 40-digit build ID and member path', async (t) => {
  const found = debugBuildIds(listing({ type: 'directory', entries: { ab: { type: 'directory', entries: { [`${rest}.debug`]: file } } } }));
  t.same(found, [{ buildId: `ab${rest}`, member: `lib/debug/.build-id/ab/${rest}.debug` }]);
});

t.test('everything else is left out', async (t) => {
  const entries = {
    AB: { type: 'directory', entries: { [`${rest}.debug`]: file } },
    abc: { type: 'directory', entries: { [`${rest}.debug`]: file } },
    zz: { type: 'directory', entries: { [`${rest}.debug`]: file } },
    cd: { type: 'directory', entries: {
      [`${rest}`]: file, [`${rest}0.debug`]: file, [`${rest.toUpperCase()}.debug`]: file, 'x.debug': file,
      [`${rest.slice(1)}f.debug`]: { type: 'symlink', target: '../ab/x.debug' },
      [`${rest.slice(2)}ff.debug`]: { type: 'directory', entries: {} },
    } },
    ef: file,
  };
  t.same(debugBuildIds(listing({ type: 'directory', entries })), []);
  t.same(debugBuildIds(listing(file)), [], '.build-id as a file');
  t.same(debugBuildIds({ version: 1, root: { type: 'regular', size: 1, narOffset: 0 } }), [], 'a NAR that is one file');
});
