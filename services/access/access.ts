// The permission engine. Pure: the caller's role on the target is looked up beforehand
// (targets.ts), so this file holds only the rules:
//   1. the role gives the permissions (roles.ts); a public cache is viewable by anyone;
//   2. an API key acts with its own list intersected with that (spec, Authentication 3);
//   3. a key pinned to a project sees no other project and no organization, a key pinned to a
//      cache sees nothing but that cache (Authentication 4);
//   4. a superuser is not an implicit member (Authentication 10): no role, no permissions.
// Visibility is decided by the role and the pin, not by the key's list: a key that lacks a
// permission on a project its owner can see gets 403 naming the permission, while a caller who
// cannot see the project gets 404, so private things are not revealed.
import { ApiError, type Permission, type Role } from '../../protocol/index.js';
import type { Principal } from './principal.js';
import { permissionsOfRole, viewPermission, type Scope } from './roles.js';

export interface AccessTarget {
  scope: Scope;
  id: string;
  /** How messages name it: `project "acme/web"`. */
  label: string;
  /** The caller's role here: project membership, else organization membership; a cache's owner is Admin. */
  role: Role | null;
  /** Public caches are visible to everyone, signed in or not. */
  public?: boolean;
}

export interface Access {
  readonly visible: boolean;
  readonly permissions: ReadonlySet<Permission>;
}

const nothing: Access = { visible: false, permissions: new Set() };

/** Whether a key's pin lets it near the target at all. */
function pinAllows(who: Principal, target: AccessTarget): boolean {
  if (who.kind !== 'user' || who.via !== 'key') return true;
  if (who.cacheId !== null) return target.scope === 'cache' && target.id === who.cacheId;
  if (who.projectId !== null) {
    if (target.scope === 'project') return target.id === who.projectId;
    return target.scope === 'cache';
  }
  return true;
}

export function accessOf(who: Principal, target: AccessTarget): Access {
  if (!pinAllows(who, target)) return nothing;
  const granted = new Set(who.kind === 'user' ? permissionsOfRole(target.scope, target.role) : []);
  if (target.scope === 'cache' && target.public) granted.add('viewCache');
  const visible = granted.has(viewPermission[target.scope]);
  if (who.kind === 'user' && who.via === 'key') {
    for (const p of granted) if (!who.permissions.has(p)) granted.delete(p);
  }
  return { visible, permissions: granted };
}

export function notFound(label: string): ApiError {
  return new ApiError('not_found', `no ${label}`);
}

export function forbidden(permission: Permission, label: string): ApiError {
  return new ApiError('forbidden', `${permission} is required on ${label}`);
}

/** The access, when the caller holds `permission`; 404 when it cannot see the target, 403 when it can but lacks the permission. */
export function demand(who: Principal, target: AccessTarget, permission: Permission): Access {
  const access = accessOf(who, target);
  if (!access.visible) throw notFound(target.label);
  if (!access.permissions.has(permission)) throw forbidden(permission, target.label);
  return access;
}

/** A user's id, or the refusal for a caller that is not signed in (routes with auth 'required' never get here anonymous). */
export function userIdOf(who: Principal): string {
  if (who.kind !== 'user') throw new ApiError('unauthorized', 'this needs a signed-in user');
  return who.userId;
}

/** Session only: inviting oneself into more power through a narrow key must not be possible. */
export function demandSession(who: Principal, what: string): string {
  const id = userIdOf(who);
  if (who.kind === 'user' && who.via === 'key') throw new ApiError('session_required', `${what} needs a session, not an API key`);
  return id;
}

/** The names of `access`'s permissions, sorted, for responses that tell the caller what it may do. */
export function permissionList(access: Access): Permission[] {
  return [...access.permissions].sort();
}
