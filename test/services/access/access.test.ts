import t from 'tap';
import { accessOf, demand, type AccessTarget } from '../../../services/access/access.js';
import type { Principal, SessionUser } from '../../../services/index.js';
import { rolePermissions } from '../../../services/access/roles.js';
import { permissionNames, type Permission } from '../../../protocol/index.js';
import type { KeyUser as K } from '../../../services/index.js';

const session: SessionUser = { kind: 'user', via: 'session', sessionId: 's', userId: 'u1', username: 'ada', superuser: false };
const key = (permissions: Permission[], pins: { projectId?: string; cacheId?: string } = {}): K => ({
  kind: 'user', via: 'key', keyId: 'k', userId: 'u1', username: 'ada', superuser: false,
  permissions: new Set(permissions), projectId: pins.projectId ?? null, cacheId: pins.cacheId ?? null,
});
const project = (role: AccessTarget['role'], id = 'p1'): AccessTarget => ({ scope: 'project', id, label: `project "acme/${id}"`, role });
const cache = (role: AccessTarget['role'], isPublic = false, id = 'c1'): AccessTarget => ({ scope: 'cache', id, label: `cache "${id}"`, role, public: isPublic });
const org = (role: AccessTarget['role']): AccessTarget => ({ scope: 'organization', id: 'o1', label: 'organization "acme"', role });

t.test('roles: each is a superset of the one below, and every permission but admin belongs to some role', (t) => {
  for (const scope of ['organization', 'project', 'cache'] as const) {
    const { View, Write, Admin } = rolePermissions[scope];
    t.ok([...View].every((p) => Write.has(p)), `${scope}: View ⊆ Write`);
    t.ok([...Write].every((p) => Admin.has(p)), `${scope}: Write ⊆ Admin`);
  }
  const held = new Set(Object.values(rolePermissions).flatMap((roles) => Object.values(roles).flatMap((s) => [...s])));
  // admin is no role's: a superuser's key holds it to use superuser powers (services/access/principal.ts)
  t.same(permissionNames.filter((p) => !held.has(p)), ['admin']);
  t.end();
});

t.test('a role gives its permissions; no role means not visible', (t) => {
  t.same(accessOf(session, project(null)), { visible: false, permissions: new Set() });
  t.ok(accessOf(session, project('View')).permissions.has('viewProject'));
  t.notOk(accessOf(session, project('View')).permissions.has('triggerEvaluation'));
  t.ok(accessOf(session, project('Write')).permissions.has('triggerEvaluation'));
  t.ok(accessOf(session, project('Admin')).permissions.has('manageMembers'));
  t.end();
});

t.test('a superuser without a role is a stranger', (t) => {
  const root: Principal = { ...session, superuser: true };
  t.equal(accessOf(root, project(null)).visible, false);
  t.throws(() => demand(root, project(null), 'viewProject'), { name: 'ApiError', status: 404 });
  t.end();
});

t.test('public caches are visible to everyone, anonymous included; nothing more', (t) => {
  t.same([...accessOf({ kind: 'anonymous' }, cache(null, true)).permissions], ['viewCache']);
  t.equal(accessOf({ kind: 'anonymous' }, cache(null, false)).visible, false);
  t.equal(accessOf({ kind: 'anonymous' }, project('Admin')).visible, false, 'anonymous has no roles');
  t.throws(() => demand(session, cache(null, true), 'writeStore'), { name: 'ApiError', status: 403, message: 'writeStore is required on cache "c1"' });
  t.end();
});

t.test('an API key: its list ∩ the role; visibility from the role', (t) => {
  const k = key(['viewProject', 'triggerEvaluation', 'manageMembers']);
  t.same([...accessOf(k, project('Write')).permissions].sort(), ['triggerEvaluation', 'viewProject']);
  t.throws(() => demand(k, project('Write'), 'manageMembers'), { name: 'ApiError', status: 403 }, 'the key has it, the role does not');
  const narrow = key(['writeStore']);
  t.throws(() => demand(narrow, project('Admin'), 'viewProject'), { name: 'ApiError', status: 403, message: /viewProject is required/ }, 'the owner sees it: 403, not 404');
  t.throws(() => demand(narrow, project(null), 'viewProject'), { name: 'ApiError', status: 404 });
  t.end();
});

t.test('pins: a project pin sees no other project and no organization; a cache pin sees only its cache', (t) => {
  const p = key(['viewProject', 'viewOrg', 'viewCache'], { projectId: 'p1' });
  t.equal(accessOf(p, project('Admin', 'p1')).visible, true);
  t.equal(accessOf(p, project('Admin', 'p2')).visible, false);
  t.equal(accessOf(p, org('Admin')).visible, false);
  t.equal(accessOf(p, cache('View')).visible, true, 'caches are not projects: the role decides');
  const c = key(['viewProject', 'viewCache', 'writeStore'], { cacheId: 'c1' });
  t.equal(accessOf(c, cache('Write', false, 'c1')).visible, true);
  t.ok(accessOf(c, cache('Write', false, 'c1')).permissions.has('writeStore'));
  t.equal(accessOf(c, cache('Write', true, 'c2')).visible, false, 'not even a public cache');
  t.equal(accessOf(c, project('Admin')).visible, false);
  t.end();
});

