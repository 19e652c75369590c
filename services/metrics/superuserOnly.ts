// The instance-wide stored series (the instance window, job phases, their rollups) are for
// superusers only: the whole instance's load is nobody else's business.
import { ApiError } from '../../protocol/index.js';
import { isSuperuser, superuserRefusal, type Principal } from '../access/index.js';

/** 401 without an account's token, 403 for an account that is not a superuser; `what` names the series. */
export function demandSuperuser(who: Principal, what: string): void {
  if (isSuperuser(who)) return;
  if (who.kind !== 'user') throw new ApiError('unauthorized', `${what} needs a superuser's token`);
  throw new ApiError('forbidden', superuserRefusal(who, `${what} is for superusers`));
}
