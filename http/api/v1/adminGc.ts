// Garbage collection for superusers (kiln extension, docs/gc.md "Passes"): request a pass or a
// deep round now (202, the run as requested), list the last runs, read one.
import { GcRequestBody, GcRunId } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import { jsonReply } from '../../reply.js';
import type { Router } from '../../router.js';

export function adminGcRoutes(r: Router<Principal>, { gc: { admin } }: Pick<Services, 'gc'>): void {
  r.post('/admin/gc', async (req) => jsonReply(202, await admin.request(req.principal, await req.body(GcRequestBody))));
  r.get('/admin/gc', (req) => admin.recent(req.principal));
  r.get('/admin/gc/:id', (req) => admin.get(req.principal, req.param('id', GcRunId)));
}
