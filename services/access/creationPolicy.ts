// Who may create organizations, projects and caches: none, superusers or everyone.
import { ApiError } from '../../protocol/index.js';
import { isSuperuser, type Principal } from './principal.js';

/** permissions.createTeam/createProject/createCache: who may create through the API. */
export type Creators = 'none' | 'superusers' | 'everyone';

/** Refuses a creation the operator's policy does not allow (403 creation_disabled, naming the option). */
export function demandCreationAllowed(who: Principal, creators: Creators, what: string, option: string): void {
  if (creators === 'none') {
    throw new ApiError('creation_disabled', `creating ${what} through the API is turned off (${option} is none; declare them in the state file)`);
  }
  if (creators === 'superusers' && !isSuperuser(who)) {
    throw new ApiError('creation_disabled', `only superusers may create ${what} (${option} is superusers)`);
  }
}
