import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import {
  lookupNarListing,
  NarListingBuilder,
  NarParser,
  parseNarListing,
  renderNarListing,
  type NarListing,
} from '../../../protocol/nix/index.js';
import { buildFixturePaths, nixCopyToFileCache, nixStoreDump, tempDir } from '../../support/nixStore.js';

const fixtures = buildFixturePaths();
const cache = nixCopyToFileCache(tempDir('kiln-ls-'), Object.values(fixtures), { 'write-nar-listing': 'true', compression: 'none' });
const hashPart = (path: string) => path.slice(11, 43);

function listingOf(nar: Uint8Array, chunk = nar.length): NarListing {
  const builder = new NarListingBuilder();
  const parser = new NarParser(builder);
  for (let at = 0; at < nar.length; at += chunk) parser.push(nar.subarray(at, at + chunk));
  parser.end();
  return builder.listing;
}

t.test('the .ls is byte-identical to what nix copy --to file://…?write-nar-listing=true wrote', async (t) => {
  for (const [name, path] of Object.entries(fixtures)) {
    const theirs = readFileSync(join(cache, `${hashPart(path)}.ls`), 'utf8');
    t.equal(renderNarListing(listingOf(nixStoreDump(path), 13)), theirs, name);
    const reparsed = parseNarListing(theirs);
    if (!reparsed.ok) throw new Error(reparsed.reason);
    t.equal(renderNarListing(reparsed.value), theirs, `${name}: parse and render round-trips`);
  }
});

t.test('lookup by path gives the byte range of a file in the NAR', async (t) => {
  const nar = nixStoreDump(fixtures.tree);
  const listing = listingOf(nar);
  const hello = lookupNarListing(listing, 'bin/hello');
  t.same(hello, { type: 'regular', narOffset: hello?.type === 'regular' ? hello.narOffset : -1, size: 18, executable: true });
  if (hello?.type !== 'regular') throw new Error('not a file');
  t.equal(nar.subarray(hello.narOffset, hello.narOffset + hello.size).toString(), '#!/bin/sh\necho hi\n');
  t.same(lookupNarListing(listing, '/share//doc/deep/er/f'), lookupNarListing(listing, 'share/doc/deep/er/f'), 'extra slashes are ignored');
  t.same(lookupNarListing(listing, 'share/link'), { type: 'symlink', target: '../bin/hello' });
  t.same(lookupNarListing(listing, 'numbers'), { type: 'directory', entries: ['1', '10', '100', '2', '9'] }, 'entries in NAR order');
  t.same(lookupNarListing(listing, 'empty-dir'), { type: 'directory', entries: [] });
  t.match(lookupNarListing(listing, ''), { type: 'directory' }, 'the root');
  t.match(lookupNarListing(listing, 'share/__proto__'), { type: 'regular', size: 2 }, 'a file named __proto__ is just a file');
  for (const missing of ['nope', 'bin/hello/x', 'share/link/x', 'share/../bin/hello', './bin', 'bin/constructor', 'share/toString']) {
    t.equal(lookupNarListing(listing, missing), undefined, missing);
  }
  const file = listingOf(nixStoreDump(fixtures.file));
  t.match(lookupNarListing(file, ''), { type: 'regular', size: 6, executable: false });
  t.equal(lookupNarListing(file, 'x'), undefined, 'no path inside a file');
});

t.test('renders what Nix would for names JSON must escape, in code point order', async (t) => {
  const listing: NarListing = {
    version: 1,
    root: {
      type: 'directory',
      entries: Object.assign(Object.create(null) as Record<string, never>, {
        '\u{1F4E6}': { type: 'regular', size: 1, narOffset: 8 },
        '\uE000': { type: 'regular', size: 1, narOffset: 16 },
        'a"\\\n\r\t\u0001\u007f': { type: 'symlink', target: '\b\f' },
      }),
    },
  };
  t.equal(
    renderNarListing(listing),
    '{"version":1,"root":{"type":"directory","entries":{"a\\"\\\\\\n\\r\\t\\u0001\u007f":{"type":"symlink","target":"\\u0008\\u000c"},' +
      '"\uE000":{"type":"regular","size":1,"narOffset":16},"\u{1F4E6}":{"type":"regular","size":1,"narOffset":8}}}}',
  );
  t.equal(renderNarListing({ version: 1, root: { type: 'regular', size: 0, narOffset: 0 } }), '{"version":1,"root":{"type":"regular","size":0}}', 'Nix omits a zero narOffset');
  t.throws(() => new NarListingBuilder().listing, /has not been read to its end/);
});

t.test('stored listings that are not listings are refused with the field named', async (t) => {
  const cases: [string, string, RegExp][] = [
    ['{', 'listing', /not JSON/],
    ['[]', 'listing', /expected an object/],
    ['{"version":2,"root":{"type":"regular","size":1}}', 'version', /expected 1, got 2/],
    ['{"version":1}', 'root', /expected an object/],
    ['{"version":1,"root":{"type":"fifo"}}', 'root.type', /"regular", "directory" or "symlink"/],
    ['{"version":1,"root":{"type":"regular","size":-1}}', 'root.size', /byte count/],
    ['{"version":1,"root":{"type":"regular","size":1,"narOffset":"8"}}', 'root.narOffset', /byte offset/],
    ['{"version":1,"root":{"type":"regular","size":1,"executable":1}}', 'root.executable', /true or false/],
    ['{"version":1,"root":{"type":"symlink"}}', 'root.target', /a string/],
    ['{"version":1,"root":{"type":"directory"}}', 'root.entries', /an object/],
    ['{"version":1,"root":{"type":"directory","entries":{"a":{"type":"x"}}}}', 'root.entries["a"].type', /expected/],
    [`{"version":1,"root":${'{"type":"directory","entries":{"d":'.repeat(1100)}{"type":"symlink","target":"x"}${'}}'.repeat(1100)}}`, '', /nested deeper than 1024/],
  ];
  for (const [text, field, reason] of cases) {
    const parsed = parseNarListing(text);
    t.equal(parsed.ok, false, text.slice(0, 60));
    if (!parsed.ok) {
      if (field) t.equal(parsed.field, field);
      t.match(parsed.reason, reason);
    }
  }
  t.match(parseNarListing('{"version":1,"root":{"type":"regular","size":3,"executable":false}}'), { ok: true, value: { root: { size: 3, narOffset: 0 } } });
});
