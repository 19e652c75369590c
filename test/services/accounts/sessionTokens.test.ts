import t from 'tap';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadJwtSecret, sessionTokenCodec } from '../../../services/accounts/sessionTokens.js';
import { testDatabase } from '../../support/db.js';

const ids = { userId: '6f1c1a8e-4a47-4df5-9a37-0c9d9b6b1a11', sessionId: '0b7e6b52-27e7-4a2e-9d0e-2f7d2f0d8c22' };

t.test('the secret is generated once under baseDir and shared; secrets.jwtFile wins', async (t) => {
  const { sql } = await testDatabase(t);
  const dir = await mkdtemp(join(tmpdir(), 'kiln-jwt-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const a = await loadJwtSecret(sql, { baseDir: dir, 'secrets.jwtFile': null });
  const b = await loadJwtSecret(sql, { baseDir: dir, 'secrets.jwtFile': null });
  t.equal(a.length, 32);
  t.same(Buffer.from(a), Buffer.from(b), 'a second process reads the same secret');
  t.equal((await sql`select 1 from instance_secrets`).length, 0, 'no key in the database');
  await writeFile(join(dir, 'jwt'), 'operator secret\n');
  t.same(Buffer.from(await loadJwtSecret(sql, { baseDir: dir, 'secrets.jwtFile': join(dir, 'jwt') })).toString(), 'operator secret');
});

t.test('sign and verify with a moving clock', async (t) => {
  const codec = sessionTokenCodec(new Uint8Array(32).fill(7));
  const issued = new Date('2030-01-01T00:00:00Z');
  const token = await codec.sign(ids, issued, new Date('2030-01-31T00:00:00Z'));
  t.same(await codec.verify(token, new Date('2030-01-15T00:00:00Z')), { ok: true, claims: ids });
  t.same(await codec.verify(token, new Date('2030-02-01T00:00:00Z')), { ok: false, reason: 'expired' });
  t.same(await sessionTokenCodec(new Uint8Array(32).fill(8)).verify(token, issued), { ok: false, reason: 'invalid' }, 'another secret');
  const [h, p, s] = token.split('.');
  const tampered = JSON.parse(Buffer.from(p!, 'base64url').toString()) as Record<string, unknown>;
  tampered['sub'] = '11111111-1111-4111-8111-111111111111';
  t.same(await codec.verify(`${h}.${Buffer.from(JSON.stringify(tampered)).toString('base64url')}.${s}`, issued), { ok: false, reason: 'invalid' });
  const none = `${Buffer.from('{"alg":"none"}').toString('base64url')}.${p}.`;
  t.same(await codec.verify(none, issued), { ok: false, reason: 'invalid' }, 'alg none is refused');
});
