import t from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateSshKeyPair } from '../../../services/organizations/sshKeys.js';
import { cacheKeyName, cachePublicKeyText, generateCacheKey, keyHost, openCacheKey } from '../../../services/index.js';
import { secretBoxWithKey } from '../../../storage/index.js';
import { VerifyingKey } from '../../../protocol/index.js';

t.test('OpenSSH formats: ssh-keygen derives the same public key from the private key', (t) => {
  const pair = generateSshKeyPair('kiln@acme');
  t.match(pair.publicKey, /^ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI[A-Za-z0-9+/]{43} kiln@acme$/);
  t.match(pair.privateKey, /^-----BEGIN OPENSSH PRIVATE KEY-----\n[A-Za-z0-9+/=\n]+-----END OPENSSH PRIVATE KEY-----\n$/);
  const dir = mkdtempSync(join(tmpdir(), 'kiln-sshkey-'));
  writeFileSync(join(dir, 'id'), pair.privateKey, { mode: 0o600 });
  const derived = execFileSync('ssh-keygen', ['-y', '-f', join(dir, 'id')]).toString().trim();
  t.equal(derived.split(' ').slice(0, 2).join(' '), pair.publicKey.split(' ').slice(0, 2).join(' '));
  t.not(generateSshKeyPair('kiln@acme').publicKey, pair.publicKey);
  t.end();
});

t.test('cache signing keys: named <host>-<cache>-1, sealed, and they sign as Nix expects', (t) => {
  const box = secretBoxWithKey(Buffer.alloc(32, 3));
  t.equal(keyHost({ domain: 'cache.example', serveUrl: 'http://x' }), 'cache.example');
  t.equal(keyHost({ domain: null, serveUrl: 'http://127.0.0.1:3000' }), '127.0.0.1');
  t.equal(cacheKeyName('h', 'main'), 'h-main-1');
  const columns = generateCacheKey(box, 'h', 'main');
  t.equal(columns.key_name, 'h-main-1');
  t.equal(columns.public_key.length, 32);
  t.notOk(columns.secret_key.includes(columns.public_key), 'the secret half is sealed');
  const signing = openCacheKey(box, columns);
  const publicText = cachePublicKeyText(columns);
  const verifying = VerifyingKey.parse(publicText);
  t.ok(verifying.ok && verifying.value.verify('fingerprint', signing.sign('fingerprint')));
  t.end();
});
