// Sign-in through an OpenID provider: authorization code flow with PKCE, state and nonce. The
// attempt (state → verifier, nonce) waits in oidc_logins, so the callback may reach any process.
import type * as OpenIdClient from 'openid-client';
import { readSecretFile } from '../../config/index.js';
import { ApiError } from '../../protocol/index.js';
import type { IdentityDeps } from './identityDeps.js';
import { findOrCreateOidcUser, type OidcIdentity } from './oidcAccounts.js';
import type { SessionOrigin, Sessions } from './sessions.js';

/** How long a user may take at the provider before the callback is refused. */
const ATTEMPT_LIFETIME_MS = 10 * 60 * 1000;
export const OIDC_CALLBACK_PATH = '/api/v1/auth/oidc/callback';

export type Oidc = ReturnType<typeof oidcService>;

/** openid-client, loaded at the first sign-in, and the provider it discovered */
interface Provider {
  client: typeof OpenIdClient;
  configuration: OpenIdClient.Configuration;
}

export function oidcService({ sql, config, log, clock, events }: IdentityDeps, sessions: Sessions) {
  const serveUrl = config['serveUrl'].replace(/\/$/, '');
  const redirectUri = serveUrl + OIDC_CALLBACK_PATH;
  let discovered: Promise<Provider> | null = null;

  const enabled = () => {
    if (!config['oidc.enable']) throw new ApiError('oidc_disabled', 'OIDC sign-in is not enabled on this server (oidc.enable)');
  };

  /**
   * Discovery runs on first use and is kept; a failure is retried on the next sign-in. openid-client
   * is loaded then too, not at start (docs/http.md, "Memory at rest"): a server without OIDC never loads it.
   */
  const provider = (): Promise<Provider> => {
    discovered ??= (async () => {
      const client = await import('openid-client');
      const discoveryUrl = config['oidc.discoveryUrl'];
      const clientId = config['oidc.clientId'];
      if (!discoveryUrl || !clientId) throw new ApiError('oidc_unavailable', 'OIDC is enabled but oidc.discoveryUrl or oidc.clientId is not set');
      const secretFile = config['oidc.clientSecretFile'];
      const auth = secretFile ? client.ClientSecretBasic(readSecretFile(secretFile)) : client.None();
      const url = new URL(discoveryUrl);
      try {
        // An http:// discovery URL is the operator's explicit choice (a provider on loopback or in a private network).
        return { client, configuration: await client.discovery(url, clientId, undefined, auth, url.protocol === 'http:' ? { execute: [client.allowInsecureRequests] } : {}) };
      } catch (cause) {
        log.warn({ err: cause }, 'OIDC discovery failed');
        throw new ApiError('oidc_unavailable', `the OpenID provider at ${url.origin} did not answer discovery: ${(cause as Error).message}`);
      }
    })();
    discovered.catch(() => {
      discovered = null;
    });
    return discovered;
  };

  const failed = (message: string) => new ApiError('oidc_failed', `OIDC sign-in failed: ${message}`);

  async function identityOf({ client, configuration }: Provider, tokens: Awaited<ReturnType<typeof OpenIdClient.authorizationCodeGrant>>): Promise<OidcIdentity> {
    const claims = tokens.claims();
    if (!claims) throw failed('the provider returned no ID token');
    let source: Record<string, unknown> = claims;
    // Providers that keep profile claims out of the ID token hand them out at the userinfo endpoint.
    if (typeof claims['email'] !== 'string' && configuration.serverMetadata().userinfo_endpoint) {
      source = { ...(await client.fetchUserInfo(configuration, tokens.access_token, claims.sub)), ...claims };
    }
    const text = (k: string) => (typeof source[k] === 'string' && source[k] !== '' ? (source[k] as string) : null);
    const email = text('email');
    return {
      subject: claims.sub,
      email: email !== null && email.length <= 254 ? email : null,
      emailVerified: source['email_verified'] === true,
      preferredUsername: text('preferred_username'),
      name: text('name'),
    };
  }

  return {
    /** The provider's authorization URL for a new sign-in attempt. */
    async authorizationUrl(): Promise<string> {
      enabled();
      const { client, configuration } = await provider();
      const state = client.randomState();
      const nonce = client.randomNonce();
      const verifier = client.randomPKCECodeVerifier();
      const now = clock.now();
      await sql`delete from oidc_logins where expires_at < ${now}`;
      await sql`
        insert into oidc_logins (state, code_verifier, nonce, created_at, expires_at)
        values (${state}, ${verifier}, ${nonce}, ${now}, ${new Date(now.getTime() + ATTEMPT_LIFETIME_MS)})`;
      return client.buildAuthorizationUrl(configuration, {
        redirect_uri: redirectUri,
        scope: config['oidc.scopes'].join(' '),
        state,
        nonce,
        code_challenge: await client.calculatePKCECodeChallenge(verifier),
        code_challenge_method: 'S256',
      }).href;
    },

    /** Completes a sign-in from the callback's query string; a session token for the account. */
    async complete(query: URLSearchParams, origin: SessionOrigin): Promise<string> {
      enabled();
      const error = query.get('error');
      if (error) throw failed(`the provider answered ${error}${query.get('error_description') ? `: ${query.get('error_description')}` : ''}`);
      const state = query.get('state') ?? '';
      const [attempt] = await sql<{ code_verifier: string; nonce: string; expires_at: Date }[]>`
        delete from oidc_logins where state = ${state} returning code_verifier, nonce, expires_at`;
      if (!attempt || attempt.expires_at <= clock.now()) throw failed('unknown or expired sign-in attempt; start again');
      const provided = await provider();
      const { client, configuration } = provided;
      let identity: OidcIdentity;
      try {
        const tokens = await client.authorizationCodeGrant(configuration, new URL(`${redirectUri}?${query.toString()}`), {
          pkceCodeVerifier: attempt.code_verifier,
          expectedState: state,
          expectedNonce: attempt.nonce,
          idTokenExpected: true,
        });
        identity = await identityOf(provided, tokens);
      } catch (e) {
        if (e instanceof ApiError) throw e;
        log.warn({ err: e }, 'OIDC code exchange failed');
        throw failed((e as Error).message);
      }
      const user = await findOrCreateOidcUser(sql, events, identity);
      if (user.disabled) throw new ApiError('account_disabled', 'this account is disabled');
      return (await sessions.create(user, origin, 'oidc')).token;
    },
  };
}
