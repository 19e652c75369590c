import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import {
  narinfoFingerprint,
  parseNarinfo,
  renderNarinfo,
  signNarinfo,
  SigningKey,
  verifyNarinfo,
  VerifyingKey,
} from '../../../protocol/nix/index.js';
import { buildFixturePaths, nixCopyToFileCache, nixGenerateKey, nixVerifyInCache, tempDir } from '../../support/nixStore.js';

const ok = <T>(r: { ok: true; value: T } | { ok: false; field: string; reason: string }): T => {
  if (!r.ok) throw new Error(`${r.field}: ${r.reason}`);
  return r.value;
};

const fixtures = buildFixturePaths();
const paths = [fixtures.file, fixtures.tree, fixtures.refs];
const work = tempDir('kiln-sign-');
const nixKey = nixGenerateKey('test-1');
writeFileSync(join(work, 'nix.key'), nixKey.secret);
const signedByNix = nixCopyToFileCache(join(work, 'signed'), paths, { compression: 'none', 'secret-key': join(work, 'nix.key') });

t.test('a key from nix key generate-secret reads, prints and derives its public key as Nix does', async (t) => {
  const key = ok(SigningKey.parse(`${nixKey.secret}\n`));
  t.equal(key.name, 'test-1');
  t.equal(key.toString(), nixKey.secret);
  t.equal(key.publicKey.toString(), nixKey.public);
  t.equal(ok(VerifyingKey.parse(nixKey.public)).toString(), nixKey.public);
});

t.test('our signatures of Nix-written narinfos are identical to the ones Nix made, and verify', async (t) => {
  const key = ok(SigningKey.parse(nixKey.secret));
  const trusted = ok(VerifyingKey.parse(nixKey.public));
  for (const name of readdirSync(signedByNix).filter((n) => n.endsWith('.narinfo'))) {
    const info = ok(parseNarinfo(readFileSync(join(signedByNix, name), 'utf8')));
    t.same([signNarinfo(info, key)], info.sigs, name);
    t.ok(verifyNarinfo(info, [trusted]), `${name} verifies`);
    t.notOk(verifyNarinfo({ ...info, narSize: info.narSize + 1 }, [trusted]), `${name} with another size does not`);
  }
});

t.test('a key we generate is one Nix can sign with, and signs identically', async (t) => {
  const ours = SigningKey.generate('kiln-test-1');
  writeFileSync(join(work, 'ours.key'), ours.toString());
  const cache = nixCopyToFileCache(join(work, 'ours'), paths, { compression: 'none', 'secret-key': join(work, 'ours.key') });
  for (const path of paths) {
    const info = ok(parseNarinfo(readFileSync(join(cache, `${path.slice(11, 43)}.narinfo`), 'utf8')));
    t.same(info.sigs, [signNarinfo(info, ours)], path);
  }
  t.equal(ok(SigningKey.parse(ours.toString())).publicKey.toString(), ours.publicKey.toString(), 'round-trips');
});

t.test('nix store verify accepts narinfos we signed, and refuses them under another key', async (t) => {
  const ours = SigningKey.generate('kiln-cache-1');
  // An unsigned cache from Nix, whose narinfos we sign and rewrite.
  const cache = nixCopyToFileCache(join(work, 'resigned'), paths, { compression: 'none' });
  for (const path of paths) {
    const file = join(cache, `${path.slice(11, 43)}.narinfo`);
    const info = ok(parseNarinfo(readFileSync(file, 'utf8')));
    t.same(info.sigs, [], 'Nix left it unsigned');
    writeFileSync(file, renderNarinfo({ ...info, sigs: [signNarinfo(info, ours)] }));
  }
  const accepted = nixVerifyInCache(cache, paths, ours.publicKey.toString());
  t.equal(accepted.status, 0, accepted.output);
  const refused = nixVerifyInCache(cache, paths, SigningKey.generate('kiln-cache-1').publicKey.toString());
  t.not(refused.status, 0);
  t.match(refused.output, /is untrusted/);
});

t.test('the fingerprint is exactly Nix\'s', async (t) => {
  const refs = ok(parseNarinfo(readFileSync(join(signedByNix, `${fixtures.refs.slice(11, 43)}.narinfo`), 'utf8')));
  t.equal(
    narinfoFingerprint(refs),
    `1;${fixtures.refs};${refs.narHash};${refs.narSize};${[fixtures.file, fixtures.refs].sort().join(',')}`,
  );
  t.equal(narinfoFingerprint({ ...refs, references: [] }, '/nix/store'), `1;${fixtures.refs};${refs.narHash};${refs.narSize};`);
  t.throws(() => narinfoFingerprint({ ...refs, narHash: 'md5:x' }), /is not a sha256 hash/);
  t.throws(() => narinfoFingerprint({ ...refs, narSize: 0 }), /NarSize is not known/);
});

t.test('bad keys and signatures are refused clearly', async (t) => {
  const cases: [string, string, RegExp][] = [
    ['', 'secretKey', /expected "<key name>:<base64>"/],
    [':AAAA', 'secretKey', /expected "<key name>:<base64>"/],
    ['na me:AAAA', 'secretKey', /has a space or a colon/],
    ['test-1:AAAA', 'secretKey', /expected 64 bytes of base64 after "test-1:", got 3 bytes/],
    ['test-1:!!!!', 'secretKey', /characters outside base64/],
    [nixKey.public, 'secretKey', /expected 64 bytes/],
  ];
  for (const [text, field, reason] of cases) t.match(SigningKey.parse(text), { ok: false, field, reason }, text);
  t.match(VerifyingKey.parse(nixKey.secret), { ok: false, field: 'publicKey', reason: /expected 32 bytes/ });
  const secret = Buffer.from(nixKey.secret.split(':')[1]!, 'base64');
  secret[40] = secret[40]! ^ 1;
  t.match(SigningKey.parse(`test-1:${secret.toString('base64')}`), { ok: false, reason: /public half does not belong/ });
  t.throws(() => SigningKey.generate('has:colon'), /must be non-empty without spaces or colons/);

  const key = ok(SigningKey.parse(nixKey.secret));
  const sig = key.sign('message');
  t.ok(key.publicKey.verify('message', sig));
  t.ok(key.publicKey.verify(Buffer.from('message'), sig), 'bytes or text');
  t.notOk(key.publicKey.verify('messagE', sig), 'another message');
  t.notOk(key.publicKey.verify('message', sig.replace('test-1:', 'test-2:')), 'another key name');
  t.notOk(key.publicKey.verify('message', 'test-1:AAAA'), 'a short signature');
  t.notOk(key.publicKey.verify('message', 'test-1'), 'no colon');
  t.notOk(key.publicKey.verify('message', `test-1:${'!'.repeat(88)}`), 'not base64');
});
