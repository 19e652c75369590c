// GET /commits/{id}: a commit as the caller's visible evaluations know it (docs/builds.md, "Commits").
import { CommitId } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import type { Router } from '../../router.js';

export function commitsRoutes(api: Router<Principal>, { buildRequests: { commits } }: Pick<Services, 'buildRequests'>): void {
  api.get('/commits/:id', (req) => commits.get(req.principal, req.param('id', CommitId)));
}
