// Guards that require a signed-in user or a session (not an API key).
import { ApiError } from '../../protocol/index.js';
import type { KeyUser, Principal, SessionUser } from './principal.js';

/** The signed-in user behind a principal; 401 for anonymous callers. */
export function requireUser(who: Principal): SessionUser | KeyUser {
  if (who.kind !== 'user') throw new ApiError('unauthorized', 'this needs the header Authorization: Bearer <token>');
  return who;
}

/** Only a session (not an API key) may manage keys or the account itself (spec: Authentication 6). */
export function requireSession(who: Principal, what: string): SessionUser {
  const user = requireUser(who);
  if (user.via !== 'session') throw new ApiError('session_required', `${what} needs a session token; an API key cannot do it`);
  return user;
}
