import { createHash, randomBytes } from 'node:crypto';
import t from 'tap';
import { digestBytes, formatHash, hashEquals, parseHash, toNix32Hash, type Hash } from '../../../protocol/nix/index.js';
import { nix } from '../../support/nixStore.js';

const value = (r: ReturnType<typeof parseHash>): Hash => {
  if (!r.ok) throw new Error(`${r.field}: ${r.reason}`);
  return r.value;
};

t.test('every spelling Nix prints parses to the same digest', async (t) => {
  const digest = createHash('sha256').update('kiln').digest();
  const hex = `sha256:${digest.toString('hex')}`;
  const [sri] = nix(['hash', 'to-sri', hex]).trim().split('\n');
  const [b32] = nix(['hash', 'to-base32', hex]).trim().split('\n');
  const [b64] = nix(['hash', 'to-base64', hex]).trim().split('\n');
  const expected: Hash = { algorithm: 'sha256', digest };
  for (const text of [hex, hex.toUpperCase().replace('SHA256', 'sha256'), sri!, `sha256:${b32}`, `sha256:${b64}`]) {
    t.ok(hashEquals(value(parseHash(text)), expected), text);
  }
  t.ok(hashEquals(value(parseHash(b32!, 'sha256')), expected), 'bare nix32 with a known algorithm');
  t.equal(formatHash(expected), `sha256:${b32}`);
  t.equal(formatHash(expected, 'sri'), sri);
  t.equal(formatHash(expected, 'base64'), `sha256:${b64}`);
  t.equal(formatHash(expected, 'base16'), hex);
  t.equal(formatHash(expected, 'nix32', false), b32);
  t.equal(toNix32Hash(sri!), `sha256:${b32}`);
});

t.test('md5, sha1 and sha512 as well (oracle: nix hash to-sri)', async (t) => {
  for (const algorithm of ['md5', 'sha1', 'sha512'] as const) {
    const digest = randomBytes(digestBytes(algorithm));
    const sri = nix(['hash', 'to-sri', `${algorithm}:${digest.toString('hex')}`]).trim();
    t.equal(formatHash({ algorithm, digest }, 'sri'), sri);
    t.ok(hashEquals(value(parseHash(sri)), { algorithm, digest }));
  }
});

t.test('blake3 is recognised as a hash kind (legacy uploads)', async (t) => {
  const digest = randomBytes(32);
  const h = value(parseHash(`blake3:${digest.toString('hex')}`));
  t.equal(h.algorithm, 'blake3');
  t.ok(hashEquals(value(parseHash(formatHash(h))), h));
  t.ok(hashEquals(value(parseHash(formatHash(h, 'sri'))), h));
});

t.test('bad hashes name the problem', async (t) => {
  const cases: [string, RegExp, ('sha256' | undefined)?][] = [
    ['abc', /expected "<algorithm>:<digest>"/],
    ['sha3:abc', /unknown hash algorithm "sha3"/],
    ['sha256:abc', /not a valid sha256 digest: expected 52 nix32, 64 base16 or 44 base64/],
    [`sha256:${'g'.repeat(64)}`, /not a valid sha256 digest/],
    [`sha256:${'e'.repeat(52)}`, /not a valid sha256 digest/],
    [`sha256-${'A'.repeat(43)}`, /expected 44 base64 characters/],
    [`sha256:${'!'.repeat(44)}`, /not a valid sha256 digest/],
    [`md5:${'0'.repeat(32)}`, /expected a sha256 hash, got md5/, 'sha256'],
  ];
  for (const [text, reason, algorithm] of cases) {
    const r = parseHash(text, algorithm);
    t.equal(r.ok, false, text);
    if (!r.ok) {
      t.equal(r.field, 'hash');
      t.match(r.reason, reason, text);
    }
  }
  // A base64 digest with stray bits in its last character is not the canonical spelling.
  const b64 = Buffer.alloc(32).toString('base64');
  t.equal(parseHash(`sha256:${b64.slice(0, 42)}B=`).ok, false);
  t.equal(toNix32Hash('nope'), undefined);
});
