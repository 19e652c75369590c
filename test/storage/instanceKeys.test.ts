import t from 'tap';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { loadJwtSecret } from '../../services/accounts/sessionTokens.js';
import { generatedKeyFile, keyFingerprint, openSecretBox, rawKeyFileText, secretBoxWithKey } from '../../storage/index.js';
import { testDatabase } from '../support/db.js';

// A copy of the database alone must not open sealed secrets or forge sessions; several processes
// must share one key and never generate a second one (storage/instanceKeys.ts).

type Teardown = Parameters<typeof testDatabase>[0];

async function tempDir(t: Teardown): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'kiln-keys-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

const crypt = (baseDir: string, file: string | null = null) => ({ baseDir, 'secrets.cryptFile': file });
const jwt = (baseDir: string, file: string | null = null) => ({ baseDir, 'secrets.jwtFile': file });
const mode = async (path: string) => (await stat(path)).mode & 0o777;

t.test('a generated key lives in a 0600 file under baseDir; the database keeps only its fingerprint', async (t) => {
  const { sql } = await testDatabase(t);
  const baseDir = await tempDir(t);
  const box = await openSecretBox(sql, crypt(baseDir));
  const secret = await loadJwtSecret(sql, jwt(baseDir));
  const cryptFile = generatedKeyFile(baseDir, 'crypt.key');
  const jwtFile = generatedKeyFile(baseDir, 'jwt.secret');
  t.equal(await mode(cryptFile), 0o600);
  t.equal(await mode(jwtFile), 0o600);
  t.equal(await mode(join(baseDir, 'secrets')), 0o700);
  t.same(await readdir(join(baseDir, 'secrets')), ['crypt.key', 'jwt.key'], 'no temporary file left behind');
  t.equal((await sql`select 1 from instance_secrets`).length, 0, 'no key in instance_secrets');
  const marks = await sql<{ name: string; fingerprint: Buffer }[]>`select name, fingerprint from instance_key_fingerprints order by name`;
  t.same(marks.map((m) => m.name), ['crypt.key', 'jwt.secret']);
  t.same(marks[1]!.fingerprint, keyFingerprint(secret));
  t.not(marks[1]!.fingerprint.equals(Buffer.from(secret)), 'the fingerprint is not the key');
  const again = await openSecretBox(sql, crypt(baseDir));
  t.equal(again.open(box.seal(Buffer.from('x'))).toString(), 'x', 'a restart reads the same key');
});

t.test('two processes starting at once on a fresh database and one baseDir agree on one key', async (t) => {
  const { url } = await testDatabase(t);
  const baseDir = await tempDir(t);
  const pools = [postgres(url, { max: 1, onnotice: () => undefined }), postgres(url, { max: 1, onnotice: () => undefined })];
  t.teardown(() => Promise.all(pools.map((p) => p.end())));
  const [a, b] = await Promise.all(pools.map((p) => openSecretBox(p, crypt(baseDir))));
  t.equal(b!.open(a!.seal(Buffer.from('one key'))).toString(), 'one key');
  const [x, y] = await Promise.all(pools.map((p) => loadJwtSecret(p, jwt(baseDir))));
  t.same(Buffer.from(x!), Buffer.from(y!));
});

t.test('a second host without the key file refuses to start instead of generating a second key', async (t) => {
  const { url, sql } = await testDatabase(t);
  const [hostA, hostB] = [await tempDir(t), await tempDir(t)];
  const pools = [postgres(url, { max: 1, onnotice: () => undefined }), postgres(url, { max: 1, onnotice: () => undefined })];
  t.teardown(() => Promise.all(pools.map((p) => p.end())));
  // Both start together on a fresh database: exactly one generates, the other refuses.
  const started = await Promise.allSettled([openSecretBox(pools[0]!, crypt(hostA)), openSecretBox(pools[1]!, crypt(hostB))]);
  t.equal(started.filter((s) => s.status === 'fulfilled').length, 1, 'one process generated the key');
  const refused = started.find((s) => s.status === 'rejected');
  t.match(refused?.reason, { name: 'ConfigError', message: /secrets\.cryptFile is not set .* copy that process's key file/ });
  const [winner, loser] = started[0]!.status === 'fulfilled' ? [hostA, hostB] : [hostB, hostA];
  await t.rejects(stat(generatedKeyFile(loser, 'crypt.key')), { code: 'ENOENT' }, 'the refusing process wrote no key');
  await t.rejects(loadJwtSecret(sql, jwt(hostA)).then(() => loadJwtSecret(sql, jwt(hostB))), { name: 'ConfigError', message: /secrets\.jwtFile is not set/ });
  // Configured with the first host's files, the second host shares its keys.
  const first = await openSecretBox(sql, crypt(winner));
  const second = await openSecretBox(sql, crypt(loser, generatedKeyFile(winner, 'crypt.key')));
  t.equal(second.open(first.seal(Buffer.from('shared'))).toString(), 'shared');
});

t.test('a generated key kept in the database by an older kiln moves to the key file, then leaves the database', async (t) => {
  const { sql } = await testDatabase(t);
  const baseDir = await tempDir(t);
  const legacyCrypt = randomBytes(32);
  const legacyJwt = randomBytes(32);
  await sql`insert into instance_secrets (name, value) values ('crypt.key', ${legacyCrypt}), ('jwt.secret', ${legacyJwt})`;
  const sealedBefore = secretBoxWithKey(legacyCrypt).seal(Buffer.from('sealed by the old version'));
  const box = await openSecretBox(sql, crypt(baseDir));
  t.equal(box.open(sealedBefore).toString(), 'sealed by the old version', 'what the old key sealed still opens');
  t.same(Buffer.from(await loadJwtSecret(sql, jwt(baseDir))), legacyJwt, 'sessions signed before the upgrade stay valid');
  t.equal((await sql`select 1 from instance_secrets`).length, 0, 'the database copies are gone');
  t.equal(await mode(generatedKeyFile(baseDir, 'crypt.key')), 0o600);
  const other = await tempDir(t);
  const elsewhere = await openSecretBox(sql, crypt(other, generatedKeyFile(baseDir, 'crypt.key')));
  t.equal(elsewhere.open(sealedBefore).toString(), 'sealed by the old version', 'the moved file works on another host too');
});

t.test('an older database key that differs from the key file is refused, and kept', async (t) => {
  const { sql } = await testDatabase(t);
  const baseDir = await tempDir(t);
  await writeFile(join(baseDir, 'operator-key'), rawKeyFileText(randomBytes(32)));
  await sql`insert into instance_secrets (name, value) values ('crypt.key', ${randomBytes(32)})`;
  await t.rejects(openSecretBox(sql, crypt(baseDir, join(baseDir, 'operator-key'))), {
    name: 'ConfigError', message: /secrets\.cryptFile \(.*\) is not the crypt\.key kept in the database by an older kiln/,
  });
  t.equal((await sql`select 1 from instance_secrets where name = 'crypt.key'`).length, 1, 'the only copy of the old key is not deleted');
  t.equal((await sql`select 1 from instance_key_fingerprints`).length, 0, 'nothing recorded');
});

t.test('secrets.cryptFile naming another key than the one the data was sealed with is refused', async (t) => {
  const { sql } = await testDatabase(t);
  const baseDir = await tempDir(t);
  await openSecretBox(sql, crypt(baseDir));
  await writeFile(join(baseDir, 'other'), 'some other operator secret\n');
  await t.rejects(openSecretBox(sql, crypt(baseDir, join(baseDir, 'other'))), {
    name: 'ConfigError', message: /secrets\.cryptFile \(.*other\) is not the crypt\.key this database's secrets were sealed with/,
  });
  // A generated file that was edited or truncated is another key too, never a silent new one.
  await writeFile(generatedKeyFile(baseDir, 'crypt.key'), 'kiln-key-v1:AAAA\n');
  await t.rejects(openSecretBox(sql, crypt(baseDir)), { name: 'ConfigError', message: /is not the crypt\.key/ });
  await writeFile(generatedKeyFile(baseDir, 'crypt.key'), '\n');
  await t.rejects(openSecretBox(sql, crypt(baseDir)), { name: 'ConfigError', message: /is empty/ });
});

t.test('replacing secrets.jwtFile is allowed (it logs everyone out); a generated jwt key is not replaced', async (t) => {
  const { sql } = await testDatabase(t);
  const baseDir = await tempDir(t);
  await loadJwtSecret(sql, jwt(baseDir));
  await writeFile(join(baseDir, 'jwt-1'), 'first operator secret\n');
  await writeFile(join(baseDir, 'jwt-2'), 'second operator secret\n');
  t.same(Buffer.from(await loadJwtSecret(sql, jwt(baseDir, join(baseDir, 'jwt-1')))).toString(), 'first operator secret');
  t.same(Buffer.from(await loadJwtSecret(sql, jwt(baseDir, join(baseDir, 'jwt-2')))).toString(), 'second operator secret');
  const [mark] = await sql<{ fingerprint: Buffer }[]>`select fingerprint from instance_key_fingerprints where name = 'jwt.secret'`;
  t.same(mark!.fingerprint, keyFingerprint(new TextEncoder().encode('second operator secret')), 'the fingerprint follows the operator');
  await t.rejects(loadJwtSecret(sql, jwt(baseDir)), { name: 'ConfigError', message: /is not the jwt\.secret the other server processes/ });
  t.match(await readFile(generatedKeyFile(baseDir, 'jwt.secret'), 'utf8'), /^kiln-key-v1:/);
});
