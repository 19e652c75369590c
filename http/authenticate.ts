// Who is calling: `Authorization: Bearer <session JWT | SVC… API key>` (spec: Authentication).
// On `none` routes credentials are ignored; on `optional` routes a bad token is still refused, so a
// client with a broken token learns it instead of silently acting as anonymous.
import { ApiError } from '../protocol/index.js';
import { anonymous, type Principal, type TokenAuthentication } from '../services/index.js';
import type { AuthMode } from './router.js';
import type { Req } from './request.js';

/** The router's hook: the principal of a request, or ApiError 401/403. */
export type Authenticate = (req: Req<Principal>, mode: AuthMode) => Promise<Principal>;

export function requestAuthenticator(tokens: Pick<TokenAuthentication, 'authenticateToken'>): Authenticate {
  return async (req, mode) => {
    if (mode === 'none') return anonymous;
    const header = req.header('authorization');
    if (!header) {
      if (mode === 'optional') return anonymous;
      throw new ApiError('unauthorized', 'this endpoint needs the header Authorization: Bearer <token>');
    }
    const bearer = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!bearer) throw new ApiError('invalid_token', 'the Authorization header must be "Bearer <token>"');
    return tokens.authenticateToken(bearer[1]!, req.peerAddress);
  };
}
