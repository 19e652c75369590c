import { randomBytes } from 'node:crypto';
import t from 'tap';
import { decodeNix32, encodeNix32, isNix32, NIX32_ALPHABET, nix32Length } from '../../../protocol/nix/index.js';
import { nix } from '../../support/nixStore.js';

t.test('encodes as Nix does, for every digest size (oracle: nix hash to-base32)', async (t) => {
  const cases: { type: string; hex: string }[] = [];
  for (const [type, bytes] of [['md5', 16], ['sha1', 20], ['sha256', 32], ['sha512', 64]] as const) {
    cases.push({ type, hex: '00'.repeat(bytes - 1) + '01' }, { type, hex: 'ff'.repeat(bytes) });
    for (let i = 0; i < 8; i++) cases.push({ type, hex: randomBytes(bytes).toString('hex') });
  }
  for (const type of ['md5', 'sha1', 'sha256', 'sha512']) {
    const mine = cases.filter((c) => c.type === type);
    const theirs = nix(['hash', 'to-base32', '--type', type, ...mine.map((c) => c.hex)]).trim().split('\n');
    mine.forEach((c, i) => {
      const bytes = Buffer.from(c.hex, 'hex');
      t.equal(encodeNix32(bytes), theirs[i], `${type} ${c.hex}`);
      t.same(Buffer.from(decodeNix32(theirs[i]!, bytes.length)!), bytes, `decodes ${theirs[i]}`);
    });
  }
});

t.test('round-trips any length, including the 20-byte store path hash', async (t) => {
  for (let n = 0; n <= 70; n++) {
    const bytes = randomBytes(n);
    const text = encodeNix32(bytes);
    t.equal(text.length, nix32Length(n));
    t.ok(isNix32(text));
    t.same(Buffer.from(decodeNix32(text, n)!), bytes);
  }
  t.equal(nix32Length(20), 32);
  t.equal(nix32Length(32), 52);
});

t.test('rejects what Nix rejects', async (t) => {
  const good = encodeNix32(randomBytes(32));
  t.equal(decodeNix32(good.slice(1), 32), undefined, 'too short');
  t.equal(decodeNix32(`${good}0`, 32), undefined, 'too long');
  for (const bad of ['e', 'o', 'u', 't', 'A', '!', 'é']) {
    t.equal(decodeNix32(bad + good.slice(1), 32), undefined, `letter ${bad}`);
    t.notOk(isNix32(bad), `isNix32(${bad})`);
  }
  // 52 digits carry 260 bits; the top 4 must be zero so each digest has one spelling.
  t.equal(decodeNix32(`z${good.slice(1)}`, 32), undefined, 'bits beyond the last byte');
  t.equal(NIX32_ALPHABET.length, 32);
});
