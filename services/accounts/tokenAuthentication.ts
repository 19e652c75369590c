// Who a bearer token or an HTTP Basic password belongs to (spec: Authentication): a session JWT or
// an API key. The HTTP layer's authenticator and the binary cache's access check both ask this.
import { ApiError } from '../../protocol/index.js';
import { looksLikeApiKey } from './apiKeySecret.js';
import type { IdentityServices } from './identity.js';
import type { Principal } from '../access/index.js';

export interface TokenAuthentication {
  /** A bearer token's principal, as seen from the client address `peerAddress`. */
  authenticateToken(token: string, peerAddress: string): Promise<Principal>;
  /**
   * HTTP Basic for the binary cache routes (spec: Authentication 7): whatever user name, the password a
   * session token or an API key. null when the header carries no Basic credentials.
   */
  authenticateBasic(header: string | undefined, peerAddress: string): Promise<Principal | null>;
}

export function createTokenAuthentication(identity: Pick<IdentityServices, 'sessions' | 'apiKeys'>): TokenAuthentication {
  const authenticateToken = (token: string, peerAddress: string): Promise<Principal> =>
    looksLikeApiKey(token) ? identity.apiKeys.authenticate(token, peerAddress) : identity.sessions.authenticate(token);
  return {
    authenticateToken,
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
