// GET /api/v1/health: whether the server and its database answer.
import { ApiError } from '../../../protocol/index.js';
import type { Services } from '../../../services/index.js';
import type { Router } from '../../router.js';

export function healthRoutes<P>(r: Router<P>, { db, startedAt, version }: Pick<Services, 'db' | 'startedAt' | 'version'>): void {
  r.get(
    '/health',
    async () => {
      try {
        await db.web`select 1`;
      } catch {
        throw new ApiError('database_unavailable', 'the database does not answer');
      }
      return { status: 'ok', version, started_at: startedAt.toISOString() };
    },
    { auth: 'none' },
  );
}
