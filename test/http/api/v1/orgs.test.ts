import t from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestKiln } from '../../../support/kiln.js';
import { signUp } from '../../../support/accounts.js';

t.test('organizations: create, read, update, delete, members, SSH key', async (t) => {
  const kiln = await startTestKiln(t);
  await signUp(kiln, 'root'); // the first account is the superuser; the others are plain
  const ada = await signUp(kiln, 'ada');
  const bob = await signUp(kiln, 'bob');
  const eve = await signUp(kiln, 'eve');

  const created = await kiln.api<{ name: string; role: string; ssh_public_key: string; permissions: string[] }>('PUT', '/orgs', {
    token: ada.token, body: { name: 'acme', display_name: 'Acme' },
  });
  t.equal(created.status, 200, JSON.stringify(created.message));
  t.equal(created.message.role, 'Admin', 'the creator becomes Admin');
  t.ok(created.message.permissions.includes('manageOrgMembers'));
  t.match(created.message.ssh_public_key, /^ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA[A-Za-z0-9+/=]+ kiln@acme$/);

  t.equal((await kiln.api('PUT', '/orgs', { token: bob.token, body: { name: 'ACME' } })).code, 'organization_exists', 'names are case-insensitive');
  t.same((await kiln.api<{ name: string }[]>('GET', '/orgs', { token: ada.token })).message.map((o) => o.name), ['acme']);
  t.same((await kiln.api<unknown[]>('GET', '/orgs', { token: eve.token })).message, [], 'a stranger lists nothing');

  t.test('a stranger learns nothing: 404, not 403', async (t) => {
    const res = await kiln.api('GET', '/orgs/acme', { token: eve.token });
    t.equal(res.status, 404);
    t.equal(res.code, 'not_found');
    t.equal((await kiln.api('PATCH', '/orgs/acme', { token: eve.token, body: { description: 'x' } })).status, 404);
  });

  t.test('members: View sees, cannot manage (403 naming the permission)', async (t) => {
    const added = await kiln.api<{ user: string; role: string }[]>('POST', '/orgs/acme/users', { token: ada.token, body: { user: 'bob', role: 'View' } });
    t.equal(added.status, 200);
    t.same(added.message.map((m) => [m.user, m.role]), [['ada', 'Admin'], ['bob', 'View']]);
    t.equal((await kiln.api('POST', '/orgs/acme/users', { token: ada.token, body: { user: 'bob', role: 'Write' } })).code, 'already_member');
    t.equal((await kiln.api('GET', '/orgs/acme', { token: bob.token })).status, 200);
    const refused = await kiln.api('PATCH', '/orgs/acme', { token: bob.token, body: { description: 'mine' } });
    t.equal(refused.status, 403);
    t.match(refused.message, /manageOrg is required on organization "acme"/);
    t.equal((await kiln.api('POST', '/orgs/acme/users', { token: bob.token, body: { user: 'eve', role: 'View' } })).status, 403);
    const promoted = await kiln.api<{ user: string; role: string }[]>('PATCH', '/orgs/acme/users', { token: ada.token, body: { user: 'bob', role: 'Admin' } });
    t.same(promoted.message.map((m) => m.role), ['Admin', 'Admin']);
    t.equal((await kiln.api('POST', '/orgs/acme/users', { token: ada.token, body: { user: 'nobody', role: 'View' } })).code, 'user_not_found');
  });

  t.test('the last Admin cannot leave or be demoted', async (t) => {
    t.equal((await kiln.api('DELETE', '/orgs/acme/users', { token: bob.token, body: { user: 'bob' } })).status, 200, 'bob leaves');
    const last = await kiln.api('DELETE', '/orgs/acme/users', { token: ada.token, body: { user: 'ada' } });
    t.equal(last.status, 409);
    t.equal(last.code, 'last_admin');
    t.equal((await kiln.api('PATCH', '/orgs/acme/users', { token: ada.token, body: { user: 'ada', role: 'View' } })).code, 'last_admin');
  });

  t.test('the SSH key is an OpenSSH ed25519 key that changes on regenerate', async (t) => {
    const before = await kiln.api<{ public_key: string }>('GET', '/orgs/acme/ssh', { token: ada.token });
    t.equal(before.message.public_key, created.message.ssh_public_key);
    const dir = mkdtempSync(join(tmpdir(), 'kiln-ssh-'));
    writeFileSync(join(dir, 'key.pub'), `${before.message.public_key}\n`);
    t.match(execFileSync('ssh-keygen', ['-l', '-f', join(dir, 'key.pub')]).toString(), /^256 SHA256:\S+ kiln@acme \(ED25519\)/, 'ssh-keygen reads it');
    const after = await kiln.api<{ public_key: string }>('POST', '/orgs/acme/ssh', { token: ada.token });
    t.match(after.message.public_key, /^ssh-ed25519 \S+ kiln@acme$/);
    t.not(after.message.public_key, before.message.public_key);
    t.equal((await kiln.api<{ public_key: string }>('GET', '/orgs/acme/ssh', { token: ada.token })).message.public_key, after.message.public_key);
    const [row] = await kiln.sql<{ ssh_private_key: Buffer }[]>`select ssh_private_key from organizations where name = 'acme'`;
    t.notOk(row!.ssh_private_key.toString('latin1').includes('OPENSSH'), 'the private key is sealed at rest');
  });

  t.test('update and delete', async (t) => {
    const patched = await kiln.api<{ description: string; display_name: string }>('PATCH', '/orgs/acme', { token: ada.token, body: { description: 'rockets' } });
    t.equal(patched.message.description, 'rockets');
    t.equal(patched.message.display_name, 'Acme', 'fields not given stay');
    t.equal((await kiln.api('DELETE', '/orgs/acme', { token: ada.token })).status, 200);
    t.equal((await kiln.api('GET', '/orgs/acme', { token: ada.token })).status, 404);
  });
});

t.test('permissions.createTeam', async (t) => {
  for (const [policy, expectUser, expectSuper] of [['none', 403, 403], ['superusers', 403, 200], ['everyone', 200, 200]] as const) {
    t.test(policy, async (t) => {
      const kiln = await startTestKiln(t, { 'permissions.createTeam': policy });
      const root = await signUp(kiln, 'root');
      const ada = await signUp(kiln, 'ada');
      const byUser = await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'a' } });
      t.equal(byUser.status, expectUser);
      if (expectUser === 403) t.equal(byUser.code, 'creation_disabled');
      t.equal((await kiln.api('PUT', '/orgs', { token: root.token, body: { name: 'b' } })).status, expectSuper);
    });
  }
});

t.test('bad bodies are 400s naming the field, and write nothing', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  const cases: [string, string, unknown, RegExp][] = [
    ['PUT', '/orgs', {}, /^name: /],
    ['PUT', '/orgs', { name: 'has space' }, /^name: must be 1-63/],
    ['PUT', '/orgs', { name: 'x'.repeat(64) }, /^name: /],
    ['PUT', '/orgs', { name: 42 }, /^name: /],
    ['PUT', '/orgs', { name: 'ok', description: 'd'.repeat(2001) }, /^description: /],
    ['PUT', '/orgs', { name: 'ok', colour: 'red' }, /colour/],
  ];
  for (const [method, path, body, message] of cases) {
    const res = await kiln.api(method, path, { token: ada.token, body });
    t.equal(res.status, 400, `${JSON.stringify(body)} → 400`);
    t.equal(res.code, 'invalid_body');
    t.match(res.message, message);
  }
  t.equal((await kiln.sql`select 1 from organizations`).length, 0, 'nothing was written');
  await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } });
  for (const [method, body, message] of [
    ['POST', { user: 'ada' }, /^role: /],
    ['POST', { user: 'ada', role: 'Owner' }, /^role: /],
    ['PATCH', { role: 'View' }, /^user: /],
    ['DELETE', {}, /^user: /],
  ] as const) {
    const res = await kiln.api(method, '/orgs/acme/users', { token: ada.token, body });
    t.equal(res.status, 400);
    t.match(res.message, message);
  }
  t.equal((await kiln.sql`select 1 from organization_members`).length, 1, 'members unchanged');
});
