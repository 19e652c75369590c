// GET /commits/{id}: a commit as the caller's visible evaluations know it (docs/builds.md, "Commits").
import { CommitId } from '../../../protocol/index.js';
import type { CommitsService, Principal } from '../../../services/index.js';
import type { Router } from '../../router.js';

export function commitsRoutes(api: Router<Principal>, commits: CommitsService): void {
  api.get('/commits/:id', (req) => commits.get(req.principal, req.param('id', CommitId)));
}
