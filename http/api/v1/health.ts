// GET /api/v1/health: whether the server and its database answer.
import { ApiError } from '../../../protocol/index.js';
import type { Router } from '../../router.js';

export interface HealthDeps {
  /** Resolves when the database answers; rejects otherwise. */
  databaseReady(): Promise<void>;
  startedAt: Date;
  version: string;
}

export function healthRoutes<P>(r: Router<P>, deps: HealthDeps): void {
  r.get(
    '/health',
    async () => {
      try {
        await deps.databaseReady();
      } catch {
        throw new ApiError('database_unavailable', 'the database does not answer');
      }
      return { status: 'ok', version: deps.version, started_at: deps.startedAt.toISOString() };
    },
    { auth: 'none' },
  );
}
