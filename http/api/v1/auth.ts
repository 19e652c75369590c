// /auth/*: registration, password sign-in, the username check, e-mail verification, logout.
// A browser opening the mailed verification link (it accepts text/html) is sent on to the web
// frontend's `/verify-email` page with the outcome in the fragment, as the OIDC callback does; any
// other client gets the envelope.
import { z } from 'zod';
import { CheckUsernameBody, isApiError, LoginBody, RegisterBody, ResendVerificationBody } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import { emptyReply } from '../../reply.js';
import { authRateLimits, rateLimited } from '../../rateLimit.js';
import type { Req } from '../../request.js';
import type { Router } from '../../router.js';

const MALFORMED_TOKEN = 'the verification link\'s token is missing or malformed';
export const VerifyEmailQuery = z.object({ token: z.string(MALFORMED_TOKEN).min(1, MALFORMED_TOKEN).max(200, MALFORMED_TOKEN) });

const origin = (req: Req<Principal>) => ({ userAgent: req.header('user-agent'), address: req.peerAddress });

export const FRONTEND_VERIFIED_PATH = '/verify-email';

const wantsPage = (req: Req<Principal>) => (req.header('accept') ?? '').includes('text/html');

export function authRoutes(r: Router<Principal>, { identity, rateLimiter, config }: Pick<Services, 'identity' | 'rateLimiter' | 'config'>): void {
  const frontend = config['frontend.enable'] ? config['frontend.url'].replace(/\/$/, '') + FRONTEND_VERIFIED_PATH : null;
  const toPage = (fragment: Record<string, string>) =>
    emptyReply(303, { Location: `${frontend}#${new URLSearchParams(fragment)}`, 'Cache-Control': 'no-store' });

  const open = { auth: 'none' } as const;
  r.post('/auth/basic/register', rateLimited(rateLimiter, authRateLimits.register, async (req) =>
    identity.accounts.register(await req.body(RegisterBody))), open);
  r.post('/auth/basic/login', rateLimited(rateLimiter, authRateLimits.login, async (req) =>
    identity.accounts.login(await req.body(LoginBody), origin(req))), open);
  r.post('/auth/check-username', rateLimited(rateLimiter, authRateLimits.checkUsername, async (req) =>
    identity.accounts.checkUsername(await req.body(CheckUsernameBody))), open);

  r.get('/auth/verify-email', async (req) => {
    const page = frontend !== null && wantsPage(req);
    try {
      const { token } = req.query(VerifyEmailQuery);
      const { username, email } = await identity.emailVerification.verify(token);
      if (page) return toPage({ verified: email, username });
      return `the e-mail address ${email} of "${username}" is verified`;
    } catch (e) {
      if (!page || !isApiError(e)) throw e;
      return toPage({ error: e.code, message: e.message });
    }
  }, open);
  r.post('/auth/resend-verification', rateLimited(rateLimiter, authRateLimits.resendVerification, async (req) => {
    await identity.emailVerification.resend((await req.body(ResendVerificationBody)).email);
    // The same answer whether or not the address has an account, so it reveals none.
    return 'if an unverified account has this address, a new verification link is on its way';
  }), open);

  // Needs the session it ends: a logged-out token is refused here like everywhere else.
  r.post('/auth/logout', async (req) => identity.sessions.logout(req.principal), { auth: 'required' });
}
