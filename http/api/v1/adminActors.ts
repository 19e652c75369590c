// GET /api/v1/admin/actors: the supervision tree for operators.
import { ApiError } from '../../../protocol/index.js';
import { isSuperuser, superuserRefusal, type Principal } from '../../../services/index.js';
import type { Router } from '../../router.js';

export interface ActorTreeSource {
  inspect(): unknown;
}

/** GET /api/v1/admin/actors: the supervision tree as operators read it (superusers only). */
export function adminActorsRoutes(r: Router<Principal>, tree: ActorTreeSource): void {
  r.get('/admin/actors', (req) => {
    if (!isSuperuser(req.principal)) throw new ApiError('forbidden', superuserRefusal(req.principal, 'only superusers may inspect actors'));
    return tree.inspect();
  });
}
