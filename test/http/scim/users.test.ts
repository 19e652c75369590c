import t, { type Test } from 'tap';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestKiln, type TestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';

const TOKEN = 'scim-token-for-tests';

async function scimKiln(t: Test, hardDelete = false): Promise<TestKiln> {
  const dir = await mkdtemp(join(tmpdir(), 'kiln-scim-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'token'), `${TOKEN}\n`);
  return startTestKiln(t, { 'scim.enable': true, 'scim.tokenFile': join(dir, 'token'), 'scim.hardDelete': hardDelete });
}

interface ScimReply {
  status: number;
  type: string | null;
  body: Record<string, unknown> & { id?: string; active?: boolean; Resources?: Record<string, unknown>[]; totalResults?: number; scimType?: string; detail?: string };
}

function scim(kiln: TestKiln, token = TOKEN) {
  return async (method: string, path: string, body?: unknown): Promise<ScimReply> => {
    const res = await fetch(`${kiln.url}/scim/v2${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/scim+json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, type: res.headers.get('content-type'), body: text ? (JSON.parse(text) as ScimReply['body']) : {} };
  };
}

const alice = {
  schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'],
  userName: 'alice',
  externalId: 'okta-123',
  name: { givenName: 'Alice', familyName: 'Liddell' },
  emails: [{ value: 'alice@example.test', primary: true, type: 'work' }],
  active: true,
  'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User': { department: 'R&D' },
};

t.test('provision, find, replace, deactivate and delete users', async (t) => {
  const kiln = await scimKiln(t);
  const call = scim(kiln);
  const created = await call('POST', '/Users', alice);
  t.equal(created.status, 201);
  t.equal(created.type, 'application/scim+json');
  t.match(created.body, { userName: 'alice', externalId: 'okta-123', displayName: 'Alice Liddell', active: true, emails: [{ value: 'alice@example.test', primary: true }], meta: { resourceType: 'User', location: `${kiln.url}/scim/v2/Users/${created.body.id}` } });
  const [row] = await kiln.sql<{ superuser: boolean; email_verified: boolean; password_hash: string | null }[]>`select superuser, email_verified, password_hash from users`;
  t.same(row, { superuser: false, email_verified: true, password_hash: null }, 'provisioned users are not superusers and sign in through OIDC');

  const dup = await call('POST', '/Users', { ...alice, emails: [] });
  t.match([dup.status, dup.body], [409, { scimType: 'uniqueness', status: '409', schemas: ['urn:ietf:params:scim:api:messages:2.0:Error'] }]);

  await call('POST', '/Users', { userName: 'bob', emails: [{ value: 'bob@example.test' }] });
  const found = await call('GET', `/Users?filter=${encodeURIComponent('userName eq "alice"')}`);
  t.match(found.body, { totalResults: 1, startIndex: 1, itemsPerPage: 1, schemas: ['urn:ietf:params:scim:api:messages:2.0:ListResponse'] });
  t.equal(found.body.Resources![0]!['id'], created.body.id);
  t.equal((await call('GET', `/Users?filter=${encodeURIComponent('externalId eq "okta-123"')}`)).body.totalResults, 1);
  t.equal((await call('GET', `/Users?filter=${encodeURIComponent('username EQ "nobody"')}`)).body.totalResults, 0);
  const page = await call('GET', '/Users?startIndex=2&count=1');
  t.match(page.body, { totalResults: 2, startIndex: 2, itemsPerPage: 1 });
  const badFilter = await call('GET', `/Users?filter=${encodeURIComponent('emails co "x"')}`);
  t.match([badFilter.status, badFilter.body.scimType], [400, 'invalidFilter']);
  t.equal((await call('GET', `/Users/${created.body.id}`)).body.userName, 'alice');
  t.equal((await call('GET', '/Users/00000000-0000-4000-8000-000000000000')).status, 404);
  t.equal((await call('GET', '/Users/not-a-uuid')).status, 404);

  const replaced = await call('PUT', `/Users/${created.body.id}`, { ...alice, userName: 'alice.l', displayName: 'Alice L.', emails: [{ value: 'al@example.test' }] });
  t.match(replaced.body, { userName: 'alice.l', displayName: 'Alice L.', emails: [{ value: 'al@example.test' }] });

  // a session of the provisioned user (given ada's password hash), to see deactivation take effect
  const ada = await signUp(kiln, 'ada');
  await kiln.sql`update users set password_hash = (select password_hash from users where username = 'ada') where username = 'alice.l'`;
  const token = (await kiln.api<string>('POST', '/auth/basic/login', { body: { loginname: 'alice.l', password: ada.password }, headers: { 'x-forwarded-for': '192.0.2.50' } })).message;
  t.equal((await kiln.api('GET', '/user', { token })).status, 200);

  const off = await call('PATCH', `/Users/${created.body.id}`, { schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'], Operations: [{ op: 'Replace', path: 'active', value: 'False' }] });
  t.match([off.status, off.body.active], [200, false], 'Azure-style string booleans');
  t.equal((await kiln.api('GET', '/user', { token })).status, 401, 'sessions of a deactivated user end');
  const refused = await kiln.api('POST', '/auth/basic/login', { body: { loginname: 'alice.l', password: ada.password }, headers: { 'x-forwarded-for': '192.0.2.51' } });
  t.same([refused.status, refused.code], [403, 'account_disabled']);
  const on = await call('PATCH', `/Users/${created.body.id}`, { Operations: [{ op: 'replace', value: { active: true, displayName: 'Alice' } }] });
  t.match(on.body, { active: true, displayName: 'Alice' });
  const badPath = await call('PATCH', `/Users/${created.body.id}`, { Operations: [{ op: 'replace', path: 'title', value: 'x' }] });
  t.match([badPath.status, badPath.body.scimType], [400, 'invalidPath']);
  const badValue = await call('PATCH', `/Users/${created.body.id}`, { Operations: [{ op: 'replace', path: 'active', value: 'maybe' }] });
  t.match([badValue.status, badValue.body.scimType, badValue.body.detail], [400, 'invalidValue', /^active: /]);

  const del = await call('DELETE', `/Users/${created.body.id}`);
  t.equal(del.status, 204);
  t.equal((await call('GET', `/Users/${created.body.id}`)).body.active, false, 'without scim.hardDelete, DELETE deactivates');
});

t.test('bad SCIM bodies and tokens', async (t) => {
  const kiln = await scimKiln(t);
  const call = scim(kiln);
  for (const [what, body, detail] of [
    ['missing userName', { emails: [] }, /^userName: /],
    ['userName with "@"', { userName: 'a@b' }, /^userName: /],
    ['bad e-mail', { userName: 'x', emails: [{ value: 'nope' }] }, /^emails\.0\.value: /],
    ['overlong displayName', { userName: 'x', displayName: 'd'.repeat(201) }, /^displayName: /],
    ['active not a boolean', { userName: 'x', active: 'yes' }, /^active: /],
  ] as [string, unknown, RegExp][]) {
    const res = await call('POST', '/Users', body);
    t.match([res.status, res.body.scimType, res.body.detail], [400, 'invalidValue', detail], what);
  }
  t.equal((await kiln.sql`select 1 from users`).length, 0, 'nothing written');
  const wrong = await scim(kiln, 'wrong')('GET', '/Users');
  t.match([wrong.status, wrong.body.status], [401, '401']);
  const none = await fetch(`${kiln.url}/scim/v2/Users`);
  t.equal(none.status, 401);
  const ada = await signUp(kiln, 'ada');
  t.equal((await scim(kiln, ada.token)('GET', '/Users')).status, 401, "a user's session is not a SCIM token");
});

t.test('scim.hardDelete deletes; SCIM off answers 404', async (t) => {
  const kiln = await scimKiln(t, true);
  const call = scim(kiln);
  const created = await call('POST', '/Users', { userName: 'alice', active: false });
  t.equal(created.body.active, false, 'created inactive');
  t.equal((await call('DELETE', `/Users/${created.body.id}`)).status, 204);
  t.equal((await kiln.sql`select 1 from users`).length, 0);
  const off = await startTestKiln(t);
  t.equal((await scim(off)('GET', '/Users')).status, 404);
});
