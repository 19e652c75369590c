// GET /workers: the workers connected to this server process (superuser, or anyone with publicStats).
import type { Principal, WorkerConnections } from '../../../services/index.js';
import type { Router } from '../../router.js';

export function connectedWorkersRoutes(r: Router<Principal>, workers: WorkerConnections): void {
  r.get('/workers', (req) => workers.list(req.principal), { auth: 'optional' });
}
