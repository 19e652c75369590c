// Who is calling: `Authorization: Bearer <session JWT | SVC… API key>` (spec: Authentication).
// On `none` routes credentials are ignored; on `optional` routes a bad token is still refused, so a
// client with a broken token learns it instead of silently acting as anonymous.
import { ApiError } from '../protocol/index.js';
import { anonymous, looksLikeApiKey, type IdentityServices, type Principal } from '../services/index.js';
import type { AuthMode } from './router.js';
import type { Req } from './request.js';

export interface Authenticator {
  /** The router's hook: the principal of a request, or ApiError 401/403. */
  authenticate(req: Req<Principal>, mode: AuthMode): Promise<Principal>;
  /** A bearer token's principal, as seen from the client address `peerAddress`. */
  authenticateToken(token: string, peerAddress: string): Promise<Principal>;
  /**
   * HTTP Basic for the binary cache routes (spec: Authentication 7): whatever user name, the password a
   * session token or an API key. null when the header carries no Basic credentials.
   */
  authenticateBasic(header: string | undefined, peerAddress: string): Promise<Principal | null>;
}

export function createAuthenticator(identity: Pick<IdentityServices, 'sessions' | 'apiKeys'>): Authenticator {
  const authenticateToken = (token: string, peerAddress: string): Promise<Principal> =>
    looksLikeApiKey(token) ? identity.apiKeys.authenticate(token, peerAddress) : identity.sessions.authenticate(token);

  return {
    authenticateToken,

    async authenticate(req, mode) {
      if (mode === 'none') return anonymous;
      const header = req.header('authorization');
      if (!header) {
        if (mode === 'optional') return anonymous;
        throw new ApiError('unauthorized', 'this endpoint needs the header Authorization: Bearer <token>');
      }
      const bearer = /^Bearer\s+(\S+)\s*$/i.exec(header);
      if (!bearer) throw new ApiError('invalid_token', 'the Authorization header must be "Bearer <token>"');
      return authenticateToken(bearer[1]!, req.peerAddress);
    },

    async authenticateBasic(header, peerAddress) {
      const basic = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header ?? '');
      if (!basic) return null;
      const decoded = Buffer.from(basic[1]!, 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      const password = colon < 0 ? '' : decoded.slice(colon + 1);
      if (password === '') throw new ApiError('invalid_token', 'the Basic password must be a session token or an API key');
      return authenticateToken(password, peerAddress);
    },
  };
}
