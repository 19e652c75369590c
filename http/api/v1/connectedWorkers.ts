// GET /workers: the workers connected to this server process (superuser, or anyone with publicStats).
import type { Principal, Services } from '../../../services/index.js';
import type { Router } from '../../router.js';

export function connectedWorkersRoutes(r: Router<Principal>, { workers }: Pick<Services, 'workers'>): void {
  r.get('/workers', (req) => workers.list(req.principal), { auth: 'optional' });
}
