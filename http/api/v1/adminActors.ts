// GET /api/v1/admin/actors: the supervision tree for operators.
import { ApiError } from '../../../protocol/index.js';
import { isSuperuser, superuserRefusal, type Principal, type Services } from '../../../services/index.js';
import type { Router } from '../../router.js';

/** GET /api/v1/admin/actors: the supervision tree as operators read it (superusers only). */
export function adminActorsRoutes(r: Router<Principal>, { root }: Pick<Services, 'root'>): void {
  r.get('/admin/actors', (req) => {
    if (!isSuperuser(req.principal)) throw new ApiError('forbidden', superuserRefusal(req.principal, 'only superusers may inspect actors'));
    return root.inspect();
  });
}
