import { ApiError } from '../protocol/index.js';
import { anonymous, type Principal } from '../services/index.js';
import type { AuthMode } from './router.js';
import type { Req } from './request.js';

/** Until accounts exist every credential is refused; `none` and `optional` routes are open. */
export async function authenticate(req: Req<Principal>, mode: AuthMode): Promise<Principal> {
  const header = req.header('authorization');
  if (mode === 'none') return anonymous;
  if (!header) {
    if (mode === 'optional') return anonymous;
    throw new ApiError(401, 'unauthorized', 'this endpoint needs the header Authorization: Bearer <token>');
  }
  throw new ApiError(401, 'invalid_token', 'the bearer token is not valid');
}
