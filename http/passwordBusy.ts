// Retry-After on routes that hash passwords when the hashing pool is busy.
import { isApiError } from '../protocol/index.js';
import { PASSWORD_BUSY_RETRY_AFTER_SECS } from '../services/index.js';
import { errorReply } from './reply.js';
import type { Handler } from './router.js';

/** Routes that hash or check a password: a refusal by the password gate (503 password_busy) carries Retry-After. */
export function withPasswordRetryAfter<P>(handler: Handler<P>): Handler<P> {
  return async (req) => {
    try {
      return await handler(req);
    } catch (e) {
      if (isApiError(e) && e.code === 'password_busy') {
        return errorReply(e.status, e.code, e.message, { 'Retry-After': String(PASSWORD_BUSY_RETRY_AFTER_SECS) });
      }
      throw e;
    }
  };
}
