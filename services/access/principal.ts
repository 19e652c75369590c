// Who is asking. Built by http's authenticator, passed to every service call. An API key's
// restrictions travel with it: its permissions are intersected with the owner's role wherever
// it is used, and a pinned key sees only its project or cache (404 elsewhere).
import type { Permission } from '../../protocol/index.js';

export type Principal = Anonymous | SessionUser | KeyUser;

export interface Anonymous {
  kind: 'anonymous';
}

interface UserBase {
  kind: 'user';
  userId: string;
  username: string;
  superuser: boolean;
}

export interface SessionUser extends UserBase {
  via: 'session';
  sessionId: string;
}

export interface KeyUser extends UserBase {
  via: 'key';
  keyId: string;
  permissions: ReadonlySet<Permission>;
  /** pinned project (UUID) or null */
  projectId: string | null;
  /** pinned cache (UUID) or null */
  cacheId: string | null;
}

export const anonymous: Principal = { kind: 'anonymous' };

/**
 * Whether the caller may use superuser powers (instance webhooks, the firehose, the actor tree,
 * workers, creating under `superusers` policies, adding members without inviting). A session of a
 * superuser may; an API key of a superuser only when it holds the `admin` permission and is pinned
 * to nothing, so a narrow CI key of an operator is not an operator (DESIGN.md, "Every tenant may be
 * hostile"). A key of anyone else gains nothing from `admin`.
 */
export function isSuperuser(p: Principal): boolean {
  if (p.kind !== 'user' || !p.superuser) return false;
  if (p.via === 'session') return true;
  return p.permissions.has('admin') && p.projectId === null && p.cacheId === null;
}

/** The 403 message for a caller without superuser powers (`refusal`); a superuser's key is also told what it lacks. */
export function superuserRefusal(p: Principal, refusal: string): string {
  if (p.kind !== 'user' || !p.superuser || p.via !== 'key') return refusal;
  return p.projectId !== null || p.cacheId !== null
    ? `${refusal}: a key pinned to a project or cache never has superuser powers`
    : `${refusal}: a superuser's API key needs the admin permission`;
}
