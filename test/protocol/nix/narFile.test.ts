import t from 'tap';
import {
  NAR_COMPRESSIONS,
  narFileExtension,
  narFileName,
  narUrl,
  parseNarFileName,
  parseNarUrl,
  parseNixNarFileName,
} from '../../../protocol/nix/index.js';

const FILE_HASH = '1b9jydsiygi6jhlz2dxbrxi6b4m9rn1anvzha8n2m0z0jq3jm4hz';

t.test('a stored NAR name round-trips through its file name and its URL', async (t) => {
  t.equal(narFileName(FILE_HASH), `${FILE_HASH}.nar.zst`);
  t.equal(narUrl(FILE_HASH), `nar/${FILE_HASH}.nar.zst`);
  t.equal(parseNarFileName(narFileName(FILE_HASH)), FILE_HASH);
  t.equal(parseNarUrl(narUrl(FILE_HASH)), FILE_HASH);
});

t.test('anything but <52 nix32 characters>.nar.zst is not a stored NAR', async (t) => {
  const names = [
    '',
    '.nar.zst',
    `${FILE_HASH}.nar`,
    `${FILE_HASH}.nar.xz`,
    `${FILE_HASH}.nar.zstd`,
    `${FILE_HASH}.nar.zst.tmp`,
    `${FILE_HASH.slice(1)}.nar.zst`,
    `${FILE_HASH}a.nar.zst`,
    `e${FILE_HASH.slice(1)}.nar.zst`,
    `${FILE_HASH.toUpperCase()}.nar.zst`,
    `../${FILE_HASH.slice(3)}.nar.zst`,
  ];
  for (const name of names) {
    t.equal(parseNarFileName(name), undefined, JSON.stringify(name));
    t.equal(parseNarUrl(`nar/${name}`), undefined, `nar/${name}`);
  }
  t.equal(parseNarUrl(narFileName(FILE_HASH)), undefined, 'a URL without nar/');
  t.equal(parseNarUrl(`log/${narFileName(FILE_HASH)}`), undefined, 'a URL in another folder');
  t.equal(parseNarUrl(`nar/nar/${narFileName(FILE_HASH)}`), undefined, 'a URL one folder deeper');
});

t.test('a NAR as nix copy names it: the hash and the compression its extension says', async (t) => {
  for (const compression of NAR_COMPRESSIONS) {
    t.same(parseNixNarFileName(`${FILE_HASH}${narFileExtension(compression)}`), { hash: FILE_HASH, compression }, compression);
  }
  t.same(parseNixNarFileName('0a.nar'), { hash: '0a', compression: 'none' }, 'any hash of 1 to 64 characters of [0-9a-z]');
  t.same(parseNixNarFileName(`${'z'.repeat(64)}.nar.bz2`), { hash: 'z'.repeat(64), compression: 'bzip2' });
  const malformed = ['', '.nar', `${'a'.repeat(65)}.nar`, 'ABC.nar', 'abc.nar.zstd', 'abc.nar.lz4', 'abc.nar.', 'abc.narzst', 'abc', 'a/b.nar', 'abc.nar.xz.xz'];
  for (const name of malformed) t.equal(parseNixNarFileName(name), undefined, JSON.stringify(name));
});
