// /user/sessions (kiln extension, docs/auth.md "Sessions"): the caller's own sign-in sessions, and
// revoking one of them (the current one: logging out). Nobody reaches another account's sessions here.
import { SessionId } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import type { Router } from '../../router.js';

export function userSessionsRoutes(r: Router<Principal>, { identity: { sessions } }: Pick<Services, 'identity'>): void {
  r.get('/user/sessions', (req) => sessions.listOwn(req.principal));
  r.del('/user/sessions/:session', (req) => sessions.revokeOwn(req.principal, req.param('session', SessionId)));
}
