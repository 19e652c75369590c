// POST /hooks/github: the Git host application's webhooks (docs/git-hosts.md). No kiln
// credentials: the X-Hub-Signature-256 HMAC authenticates the host, checked before anything else.
// The answer names the delivery and the evaluations it started (none for a delivery seen before).
import type { Principal, Services } from '../../../services/index.js';
import type { Req } from '../../request.js';
import type { Router } from '../../router.js';

/** GitHub caps a webhook payload at 25 MB. */
const MAX_HOOK_BYTES = 25 * 1024 * 1024;

/** The whole body; the stream holds it to MAX_HOOK_BYTES (413 beyond). */
async function wholeBody(req: Req<Principal>): Promise<Buffer> {
  const pieces: Uint8Array[] = [];
  for await (const piece of req.stream()) pieces.push(piece);
  return Buffer.concat(pieces);
}

export function gitHostHooksRoutes(r: Router<Principal>, { gitHosts }: Pick<Services, 'gitHosts'>): void {
  // Streamed, not buffered by the router: the route is unauthenticated, so what no body can make
  // right (the application disabled, no or a malformed signature header) is refused before up to
  // MAX_HOOK_BYTES of it are held in memory.
  r.post('/hooks/github', async (req) => {
    const header = (name: string) => req.header(name);
    gitHosts.hooks.admit(header);
    return gitHosts.hooks.receive(header, await wholeBody(req));
  }, {
    auth: 'none', body: 'stream', maxBody: MAX_HOOK_BYTES,
  });
}
