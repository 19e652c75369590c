// Bearer tokens and HTTP Basic passwords resolved to principals (services/accounts/tokenAuthentication.ts).
import t, { type Test } from 'tap';
import pino from 'pino';
import { loadConfig } from '../../config/index.js';
import { createTokenAuthentication, openIdentityServices, systemClock, type KeyUser, type Principal, type SessionUser } from '../../services/index.js';
import { testDatabase } from '../support/db.js';
import { testEvents } from '../support/testEvents.js';
import { insertCache, insertProject } from '../support/modelRows.js';

async function setup(t: Test) {
  const db = await testDatabase(t);
  const { sql } = db;
  const { events } = await testEvents(t, db);
  const config = loadConfig({ scope: 'server', env: {}, overrides: { useTls: false, baseDir: '/nonexistent' } }).values;
  const identity = await openIdentityServices({ sql, config, log: pino({ level: 'silent' }), clock: systemClock, events });
  t.teardown(() => identity.close());
  return { sql, identity, auth: createTokenAuthentication(identity) };
}

t.test('bearer tokens and HTTP Basic for the cache routes', async (t) => {
  const { sql, identity, auth } = await setup(t);
  await identity.accounts.register({ username: 'ada', name: '', email: 'ada@example.test', password: 'long enough' });
  const token = await identity.accounts.login({ loginname: 'ada', password: 'long enough' }, {});
  const session = (await auth.authenticateToken(token, '192.0.2.1')) as SessionUser;
  t.match(session, { kind: 'user', via: 'session', username: 'ada', superuser: true, sessionId: String });

  const projectId = await insertProject(sql, 'acme', 'web');
  const cacheId = await insertCache(sql, 'main');
  const created = await identity.apiKeys.create(session, { name: 'ci', permissions: ['writeStore', 'viewCache'], project: 'acme/web', cache: 'main', allowed_ips: [] });
  const key = (await auth.authenticateToken(created.secret, '192.0.2.1')) as KeyUser;
  t.match(key, { kind: 'user', via: 'key', username: 'ada', projectId, cacheId, keyId: created.id });
  t.same([...key.permissions].sort(), ['viewCache', 'writeStore']);

  const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
  t.match(await auth.authenticateBasic(basic('anything', created.secret), '192.0.2.1'), { via: 'key', keyId: created.id }, 'any user name, the key as password');
  t.match(await auth.authenticateBasic(basic('', token), '192.0.2.1'), { via: 'session' }, 'a session token as password');
  t.equal(await auth.authenticateBasic(undefined, '192.0.2.1'), null, 'no credentials: null');
  t.equal(await auth.authenticateBasic(`Bearer ${token}`, '192.0.2.1'), null, 'not Basic: null');
  await t.rejects(auth.authenticateBasic(basic('nix', 'SVCnotakey'), '192.0.2.1'), { status: 401, code: 'invalid_token' });
  await t.rejects(auth.authenticateBasic(basic('nix', ''), '192.0.2.1'), { status: 401, code: 'invalid_token' });

  const limited = await identity.apiKeys.create(session, { name: 'lan', permissions: ['viewCache'], allowed_ips: ['10.0.0.0/8'] });
  await t.rejects(auth.authenticateBasic(basic('nix', limited.secret), '192.0.2.1'), { status: 403, code: 'forbidden_source_ip' });
  t.ok(await auth.authenticateBasic(basic('nix', limited.secret), '10.9.8.7'));

  const anonymous: Principal = { kind: 'anonymous' };
  await t.rejects(identity.apiKeys.create(anonymous, { name: 'x', permissions: ['viewCache'], allowed_ips: [] }), { status: 401, code: 'unauthorized' });
  await t.rejects(identity.apiKeys.create(key, { name: 'x', permissions: ['viewCache'], allowed_ips: [] }), { status: 403, code: 'session_required' });
});
