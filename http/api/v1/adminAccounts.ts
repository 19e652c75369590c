// GET /api/v1/admin/users and /admin/sessions: the instance's accounts and sessions (superusers only).
import { AdminSessionsQuery, AdminUsersQuery } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import type { Router } from '../../router.js';

export function adminAccountsRoutes(r: Router<Principal>, { identity: { admin } }: Pick<Services, 'identity'>): void {
  r.get('/admin/users', (req) => admin.users(req.principal, req.query(AdminUsersQuery)));
  r.get('/admin/sessions', (req) => admin.sessions(req.principal, req.query(AdminSessionsQuery)));
}
