import { readdirSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import {
  hashNar,
  parseNarinfo,
  renderNarinfo,
  signNarinfo,
  SigningKey,
  toNix32Hash,
  type Narinfo,
} from '../../../protocol/nix/index.js';
import { buildFixturePaths, nixCopyToFileCache, nixGenerateKey, nixPathInfo, nixStoreAdd, nixStoreDump, tempDir } from '../../support/nixStore.js';

const fixtures = buildFixturePaths();
const work = tempDir('kiln-narinfo-');
const key = nixGenerateKey('test-1');
const keyFile = join(work, 'secret.key');
writeFileSync(keyFile, key.secret);
// A content-addressed path too, so the CA line is covered.
const caSource = join(work, 'kiln-ca-source');
mkdirSync(caSource);
writeFileSync(join(caSource, 'data'), 'content addressed\n');
const caPath = nixStoreAdd(caSource);
const paths = [...Object.values(fixtures), caPath];
const plainCache = nixCopyToFileCache(join(work, 'plain'), paths, { compression: 'none', 'secret-key': keyFile });
const zstdCache = nixCopyToFileCache(join(work, 'zstd'), paths, { compression: 'zstd', 'secret-key': keyFile });
const narinfoText = (cache: string, path: string) => readFileSync(join(cache, `${path.slice(11, 43)}.narinfo`), 'utf8');
const signer = (() => {
  const parsed = SigningKey.parse(key.secret);
  if (!parsed.ok) throw new Error(parsed.reason);
  return parsed.value;
})();

/** The narinfo kiln would write, from the NAR and the path's metadata alone. */
async function ourNarinfo(path: string, file: { url: string; compression: string; fileHash: string; fileSize: number }): Promise<Narinfo> {
  const info = nixPathInfo(path);
  const digest = await hashNar([nixStoreDump(path)]);
  const narinfo: Narinfo = {
    storePath: path,
    ...file,
    narHash: digest.narHash,
    narSize: digest.narSize,
    references: info.references.map((r) => r.slice(11)),
    sigs: [],
  };
  if (info.deriver) narinfo.deriver = info.deriver.slice(11);
  if (info.ca) narinfo.ca = info.ca;
  narinfo.sigs.push(signNarinfo(narinfo, signer));
  return narinfo;
}

t.test('with compression=none, our narinfo equals the file nix copy wrote, byte for byte', async (t) => {
  for (const path of paths) {
    const theirs = narinfoText(plainCache, path);
    const digest = await hashNar([nixStoreDump(path)]);
    const ours = await ourNarinfo(path, {
      url: `nar/${digest.narHash.slice(7)}.nar`,
      compression: 'none',
      fileHash: digest.narHash,
      fileSize: digest.narSize,
    });
    t.equal(renderNarinfo(ours), theirs, path);
  }
  t.match(narinfoText(plainCache, caPath), /\nCA: fixed:r:sha256:[0-9a-z]{52}\n$/, 'the CA fixture has a CA line');
  t.match(narinfoText(plainCache, fixtures.refs), /\nReferences: \S+-kiln-fixture-file \S+-kiln-fixture-refs\n/, 'references are sorted base names, self included');
  t.match(narinfoText(plainCache, fixtures.file), /\nReferences: \n/, 'no references is "References: "');
});

t.test('with compression=zstd, every field that does not depend on the compressor is equal', async (t) => {
  for (const path of paths) {
    const theirs = parseNarinfo(narinfoText(zstdCache, path));
    if (!theirs.ok) throw new Error(theirs.reason);
    const ours = await ourNarinfo(path, { url: 'x', compression: 'zstd', fileHash: theirs.value.fileHash!, fileSize: theirs.value.fileSize! });
    for (const field of ['storePath', 'narHash', 'narSize', 'references', 'deriver', 'sigs', 'ca'] as const) {
      t.same(ours[field], theirs.value[field], `${path.slice(44)} ${field}`);
    }
    t.match(theirs.value.url, /^nar\/[0-9a-z]{52}\.nar\.zst$/);
  }
});

t.test('every narinfo Nix wrote round-trips through parse and render', async (t) => {
  for (const cache of [plainCache, zstdCache]) {
    for (const name of readdirSync(cache).filter((n) => n.endsWith('.narinfo'))) {
      const text = readFileSync(join(cache, name), 'utf8');
      const parsed = parseNarinfo(text);
      t.ok(parsed.ok, name);
      if (parsed.ok) t.equal(renderNarinfo(parsed.value), text, name);
    }
  }
});

const HASH = 'sha256:04zwf782yjwnh3q6hz5izfd6jyip8kgw6g6yj43fiqhbyhdd0dqw';
const SP = '/nix/store/nxcr3sipk1fz9gdfgj9ychb6gxppdxg9-try-file';
const SIG = 'test-1:EtZRHoHwBea26GveRTfJCvUiUOviHdFD1nPJU18iWsHwP2d+r9OS86jqL2b/cnD52C09iqUBFJW0n9q9B/7lAw==';
const valid = [`StorePath: ${SP}`, 'URL: nar/x.nar.zst', 'Compression: zstd', `FileHash: ${HASH}`, 'FileSize: 91', `NarHash: ${HASH}`, 'NarSize: 120', 'References: ', 'Deriver: nkhhagn1xdfw4xk4a9a7g4yfvd382r71-try-file.drv', `Sig: ${SIG}`, ''].join('\n');
const replace = (field: string, line: string | undefined) =>
  valid
    .split('\n')
    .flatMap((l) => (l.startsWith(`${field}:`) ? (line === undefined ? [] : [line]) : [l]))
    .join('\n');

t.test('tolerant of order, unknown fields, other hash spellings and a missing final newline', async (t) => {
  const reordered = `${valid.trim().split('\n').reverse().join('\n')}\nX-Unknown: whatever\nSystem: x86_64-linux`;
  const parsed = parseNarinfo(reordered);
  if (!parsed.ok) throw new Error(parsed.reason);
  t.equal(parsed.value.system, 'x86_64-linux');
  const { system: _system, ...withoutSystem } = parsed.value;
  t.same(withoutSystem, (parseNarinfo(valid) as { value: Narinfo }).value, 'order and unknown fields change nothing');
  const sri = parseNarinfo(replace('NarHash', `NarHash: sha256-HDfQGvQL4ugGkd48w99EN3ppmvuxfGjwgJZLL9Bx/BM=`));
  t.match(sri, { ok: true, value: { narHash: HASH } }, 'SRI NarHash is normalised to nix32');
  t.match(parseNarinfo(replace('Compression', undefined)), { ok: true, value: { compression: 'bzip2' } }, "Nix's default compression");
  t.match(parseNarinfo(replace('Deriver', 'Deriver: unknown-deriver')), { ok: true, value: { deriver: undefined } });
  t.match(parseNarinfo(replace('FileHash', undefined)), { ok: true, value: { fileHash: undefined } }, 'FileHash is optional');
  t.match(parseNarinfo(replace('References', undefined)), { ok: true, value: { references: [] } }, 'References may be left out');
  t.match(parseNarinfo(replace('FileHash', `FileHash: blake3:${'0'.repeat(64)}`)), { ok: true, value: { fileHash: `blake3:${'0'.repeat(52)}` } }, 'legacy blake3 file hashes');
  t.match(parseNarinfo(replace('Sig', `Sig: ${SIG}\nSig: other-1:${SIG.slice(7)}`)), { ok: true, value: { sigs: [SIG, `other-1:${SIG.slice(7)}`] } }, 'Sig repeats');
  t.match(parseNarinfo(`${valid}CA: text:sha256:${'0'.repeat(64)}\n`), { ok: true, value: { ca: `text:sha256:${'0'.repeat(52)}` } });
  t.match(parseNarinfo(`${valid}CA: \n`), { ok: true, value: { ca: undefined } });
});

t.test('render sorts references and signatures and drops duplicates, as Nix does', async (t) => {
  const parsed = parseNarinfo(valid);
  if (!parsed.ok) throw new Error(parsed.reason);
  const b = 'zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz-b';
  const a = '00000000000000000000000000000000-a';
  const text = renderNarinfo({ ...parsed.value, references: [b, a, b], sigs: ['z:AAAA', 'a:AAAA', 'z:AAAA'], system: 'x86_64-linux', ca: 'fixed:sha256:x' });
  t.match(text, `References: ${a} ${b}\nDeriver: `);
  t.match(text, /\nSystem: x86_64-linux\nSig: a:AAAA\nSig: z:AAAA\nCA: fixed:sha256:x\n$/);
});

t.test('every required field, broken in turn, fails under its own name', async (t) => {
  const cases: [string, string | undefined, string, RegExp][] = [
    ['StorePath', undefined, 'StorePath', /missing/],
    ['StorePath', 'StorePath: /tmp/x', 'StorePath', /not in the store directory/],
    ['StorePath', 'StorePath: /nix/store/short', 'StorePath', /expected "<32 nix32/],
    ['URL', undefined, 'URL', /missing/],
    ['URL', 'URL: ', 'URL', /missing/],
    ['NarHash', undefined, 'NarHash', /missing/],
    ['NarHash', 'NarHash: sha256:nope', 'NarHash', /not a valid sha256 digest/],
    ['NarHash', `NarHash: md5:${'0'.repeat(32)}`, 'NarHash', /expected a sha256 hash, got md5/],
    ['NarSize', undefined, 'NarSize', /missing/],
    ['NarSize', 'NarSize: -1', 'NarSize', /not a byte count/],
    ['NarSize', 'NarSize: 12a', 'NarSize', /not a byte count/],
    ['NarSize', 'NarSize: 0', 'NarSize', /must be positive/],
    ['NarSize', 'NarSize: 99999999999999999', 'NarSize', /not a byte count/],
    ['FileSize', 'FileSize: x', 'FileSize', /not a byte count/],
    ['FileHash', 'FileHash: sha256:', 'FileHash', /not a valid sha256 digest/],
    ['References', 'References: not-a-path', 'References', /expected "<32 nix32/],
    ['Deriver', 'Deriver: bad deriver', 'Deriver', /expected "<32 nix32/],
    ['Sig', 'Sig: no-colon', 'Sig', /expected "<key name>:<base64>"/],
    ['NarSize', 'NarSize:120', 'NarSize', /expected a space after the colon/],
    ['URL', 'just some text', 'line', /expected "Key: value"/],
    ['URL', ': value', 'line', /expected "Key: value"/],
  ];
  for (const [field, line, failedField, reason] of cases) {
    const parsed = parseNarinfo(replace(field, line));
    t.match(parsed, { ok: false, field: failedField, reason }, `${field} → ${line ?? '(removed)'}`);
  }
  t.match(parseNarinfo(valid.replace(/\n/g, '\r\n')), { ok: false, field: 'line', reason: /CRLF/ });
  t.match(parseNarinfo(`${valid}NarSize: 120\n`), { ok: false, field: 'NarSize', reason: /more than once/ });
  t.match(parseNarinfo(`${valid}CA: sha256:abc\n`), { ok: false, field: 'CA', reason: /expected "text:<hash>"/ });
  t.match(parseNarinfo(`${valid}CA: fixed:r:sha256:abc\n`), { ok: false, field: 'CA', reason: /not a valid sha256 digest/ });
  t.match(parseNarinfo(''), { ok: false, field: 'StorePath', reason: /missing/ });
  t.match(parseNarinfo('\u0000'.repeat(100)), { ok: false, field: 'line' });
  t.match(parseNarinfo(valid.replace(SP, SP.replace('/nix/store', '/gnu/store')), '/gnu/store'), { ok: true }, 'the store directory is configurable');
  t.ok(toNix32Hash(HASH));
});
