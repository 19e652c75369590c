// POST /hooks/github: the Git host application's webhooks (docs/git-hosts.md). No kiln
// credentials: the X-Hub-Signature-256 HMAC authenticates the host, checked before anything else.
// The answer names the delivery and the evaluations it started (none for a delivery seen before).
import type { Principal, Services } from '../../../services/index.js';
import type { Router } from '../../router.js';

/** GitHub caps a webhook payload at 25 MB. */
const MAX_HOOK_BYTES = 25 * 1024 * 1024;

export function gitHostHooksRoutes(r: Router<Principal>, { gitHosts }: Pick<Services, 'gitHosts'>): void {
  r.post('/hooks/github', async (req) => gitHosts.hooks.receive((name) => req.header(name), await req.bytes()), {
    auth: 'none', body: 'buffer', maxBody: MAX_HOOK_BYTES,
  });
}
