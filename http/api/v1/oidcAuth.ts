// OIDC sign-in. The callback hands the session token to the web frontend in the URL fragment
// (`<frontend.url>/auth/callback#token=…`): a fragment never reaches a server, a log or a Referer.
// Failures go the same way as `#error=<code>&message=…`. With frontend.enable off there is no page
// to hand it to, and the callback answers the envelope itself (message: the token).
import { isApiError } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import { emptyReply } from '../../reply.js';
import type { Router } from '../../router.js';

export const FRONTEND_CALLBACK_PATH = '/auth/callback';

export function oidcRoutes(r: Router<Principal>, { identity: { oidc }, config }: Pick<Services, 'identity' | 'config'>): void {
  const open = { auth: 'none' } as const;
  const frontend = config['frontend.enable'] ? config['frontend.url'].replace(/\/$/, '') + FRONTEND_CALLBACK_PATH : null;

  r.post('/auth/oauth/authorize', () => oidc.authorizationUrl(), open);
  r.get('/auth/oidc/login', async () => emptyReply(302, { Location: await oidc.authorizationUrl(), 'Cache-Control': 'no-store' }), open);
  r.get('/auth/oidc/callback', async (req) => {
    try {
      const token = await oidc.complete(req.searchParams, { userAgent: req.header('user-agent'), address: req.peerAddress });
      if (!frontend) return token;
      return emptyReply(302, { Location: `${frontend}#${new URLSearchParams({ token })}`, 'Cache-Control': 'no-store' });
    } catch (e) {
      if (!frontend || !isApiError(e)) throw e;
      const fragment = new URLSearchParams({ error: e.code, message: e.message });
      return emptyReply(302, { Location: `${frontend}#${fragment}`, 'Cache-Control': 'no-store' });
    }
  }, open);
}
