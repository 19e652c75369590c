import type { Permission } from '../protocol/index.js';

// Who is asking. Built by http's authenticator, passed to every service call. An API key's
// restrictions travel with it: its permissions are intersected with the owner's role wherever
// it is used, and a pinned key sees only its project or cache (404 elsewhere).
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

export const isSuperuser = (p: Principal): boolean => p.kind === 'user' && p.superuser;
