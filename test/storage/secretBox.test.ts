import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { keyFromSecretText, openSecretBox, secretBoxWithKey } from '../../storage/index.js';
import { testDatabase } from '../support/db.js';

t.test('seal and open round-trip; tampering and the wrong key are refused', (t) => {
  const box = secretBoxWithKey(Buffer.alloc(32, 1));
  const sealed = box.seal(Buffer.from('the private key'));
  t.not(sealed.toString('latin1').includes('the private key'), true);
  t.equal(box.open(sealed).toString(), 'the private key');
  t.not(box.seal(Buffer.from('x')).equals(box.seal(Buffer.from('x'))), 'a fresh IV every time');
  const flipped = Buffer.from(sealed);
  flipped[flipped.length - 1]! ^= 1;
  t.throws(() => box.open(flipped), /altered or sealed with another key/);
  t.throws(() => secretBoxWithKey(Buffer.alloc(32, 2)).open(sealed), /altered or sealed with another key/);
  t.throws(() => box.open(Buffer.alloc(5)), /truncated/);
  t.throws(() => secretBoxWithKey(Buffer.alloc(16)), /32 bytes/);
  t.end();
});

t.test('the key: generated once under baseDir, or from secrets.cryptFile', async (t) => {
  const { sql } = await testDatabase(t);
  const baseDir = mkdtempSync(join(tmpdir(), 'kiln-crypt-'));
  t.teardown(() => rmSync(baseDir, { recursive: true, force: true }));
  const first = await openSecretBox(sql, { baseDir, 'secrets.cryptFile': null });
  const second = await openSecretBox(sql, { baseDir, 'secrets.cryptFile': null });
  t.equal(second.open(first.seal(Buffer.from('shared'))).toString(), 'shared', 'every process on this baseDir gets the same generated key');
  t.equal((await sql`select 1 from instance_secrets`).length, 0, 'no key in the database');
  const copy = mkdtempSync(join(tmpdir(), 'kiln-crypt-'));
  t.teardown(() => rmSync(copy, { recursive: true, force: true }));
  const onOtherHost = await openSecretBox(sql, { baseDir: copy, 'secrets.cryptFile': join(baseDir, 'secrets', 'crypt.key') });
  t.equal(onOtherHost.open(first.seal(Buffer.from('f'))).toString(), 'f', 'the generated file, named by secrets.cryptFile elsewhere, is the same key');
  await t.rejects(openSecretBox(sql, { baseDir, 'secrets.cryptFile': join(baseDir, 'missing') }), /cannot read secret file/);
});

t.test('an operator key file is any text, turned into a key with HKDF', async (t) => {
  const { sql } = await testDatabase(t);
  const dir = mkdtempSync(join(tmpdir(), 'kiln-crypt-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'key'), 'a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90\n');
  const fromFile = await openSecretBox(sql, { baseDir: dir, 'secrets.cryptFile': join(dir, 'key') });
  const again = await openSecretBox(sql, { baseDir: dir, 'secrets.cryptFile': join(dir, 'key') });
  t.equal(again.open(fromFile.seal(Buffer.from('f'))).toString(), 'f');
  t.equal(secretBoxWithKey(keyFromSecretText('a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90')).open(fromFile.seal(Buffer.from('f'))).toString(), 'f');
});
