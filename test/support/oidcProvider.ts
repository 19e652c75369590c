// A real OpenID provider on loopback (the oidc-provider package). Its login page is replaced by a
// handler that signs in whichever account the test chose, and every scope is pre-granted, so a
// plain HTTP client with a cookie jar can walk the whole authorization code flow.
import { createServer } from 'node:http';
import { exportJWK, generateKeyPair } from 'jose';
import Provider, { type Adapter, type AdapterPayload, type KoaContextWithOIDC } from 'oidc-provider';
import type { Test } from 'tap';
import { freePort } from './kiln.js';

export interface OidcAccount {
  email?: string;
  email_verified?: boolean;
  preferred_username?: string;
  name?: string;
}

export interface TestOidcProvider {
  issuer: string;
  clientId: string;
  clientSecret: string;
  accounts: Map<string, OidcAccount>;
  /** the subject the next login interaction signs in as */
  signInAs(subject: string): void;
  /** Follows redirects from `url` through the provider until one leaves it; that URL (kiln's callback). */
  walk(url: string): Promise<string>;
}

/** The provider's storage, in a Map (its own fallback would do the same, with a warning on stderr). */
class MemoryAdapter implements Adapter {
  private static readonly rows = new Map<string, AdapterPayload>();
  constructor(private readonly model: string) {}
  private key(id: string) {
    return `${this.model}:${id}`;
  }
  async upsert(id: string, payload: AdapterPayload) {
    MemoryAdapter.rows.set(this.key(id), payload);
  }
  async find(id: string) {
    return MemoryAdapter.rows.get(this.key(id));
  }
  async findByUserCode(): Promise<undefined> {
    return undefined;
  }
  async findByUid(uid: string) {
    for (const [key, row] of MemoryAdapter.rows) if (key.startsWith(`${this.model}:`) && row.uid === uid) return row;
    return undefined;
  }
  async consume(id: string) {
    const row = MemoryAdapter.rows.get(this.key(id));
    if (row) row.consumed = Math.floor(Date.now() / 1000);
  }
  async destroy(id: string) {
    MemoryAdapter.rows.delete(this.key(id));
  }
  async revokeByGrantId(grantId: string) {
    for (const [key, row] of MemoryAdapter.rows) if (row.grantId === grantId) MemoryAdapter.rows.delete(key);
  }
}

export async function startOidcProvider(t: Pick<Test, 'teardown'>, redirectUris: string[]): Promise<TestOidcProvider> {
  const port = await freePort();
  const issuer = `http://127.0.0.1:${port}`;
  const clientId = 'kiln';
  const clientSecret = 'kiln-client-secret-for-tests';
  const accounts = new Map<string, OidcAccount>();
  let subject = '';
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const ttl = 600;
  const provider = new Provider(issuer, {
    adapter: MemoryAdapter,
    jwks: { keys: [{ ...(await exportJWK(privateKey)), alg: 'RS256', use: 'sig' }] },
    ttl: { Interaction: ttl, Grant: ttl, Session: ttl, AccessToken: ttl, IdToken: ttl, AuthorizationCode: ttl },
    clients: [{ client_id: clientId, client_secret: clientSecret, redirect_uris: redirectUris, grant_types: ['authorization_code'], response_types: ['code'] }],
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name', 'preferred_username'] },
    features: { devInteractions: { enabled: false } },
    cookies: { keys: ['oidc-test-cookie-key'] },
    async findAccount(_ctx: KoaContextWithOIDC, sub: string) {
      const account = accounts.get(sub);
      return account ? { accountId: sub, claims: async () => ({ sub, ...account }) } : undefined;
    },
    async loadExistingGrant(ctx: KoaContextWithOIDC) {
      const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client!.clientId, accountId: ctx.oidc.session!.accountId! });
      grant.addOIDCScope('openid email profile');
      await grant.save();
      return grant;
    },
  });
  const callback = provider.callback();
  const server = createServer((req, res) => {
    if (req.url?.startsWith('/interaction/')) {
      provider.interactionFinished(req, res, { login: { accountId: subject } }, { mergeWithLastSubmission: false }).catch((e: unknown) => {
        res.statusCode = 500;
        res.end(String(e));
      });
      return;
    }
    callback(req, res);
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', () => resolve()));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const jar = new Map<string, string>();
  return {
    issuer, clientId, clientSecret, accounts,
    signInAs(s) {
      subject = s;
      jar.clear(); // a fresh browser: no session at the provider
    },
    async walk(start) {
      let url = start;
      for (let hop = 0; hop < 20; hop++) {
        if (!url.startsWith(issuer)) return url;
        const res = await fetch(url, { redirect: 'manual', headers: { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; ') } });
        for (const c of res.headers.getSetCookie()) {
          const [pair] = c.split(';');
          const eq = pair!.indexOf('=');
          jar.set(pair!.slice(0, eq), pair!.slice(eq + 1));
        }
        const location = res.headers.get('location');
        if (!location) throw new Error(`the provider answered ${res.status} without a redirect at ${url}: ${await res.text()}`);
        url = new URL(location, url).href;
      }
      throw new Error('too many redirects at the OpenID provider');
    },
  };
}
