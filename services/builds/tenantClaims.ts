// An evaluation claims the builds whose outcome stands for other organizations only (docs/builds.md,
// "Whose completion"): when it starts building, and when a direct build records its graph, it
// queues them again for itself (requeue other_tenant), under the locks of tenantScope.ts.
import type { TransactionSql } from 'postgres';
import type { Emit } from '../../storage/index.js';
import { applyStatusChanges } from './buildStatus.js';
import { freshAttempts } from './attemptScopes.js';
import { lockScopedBuilds, outcomesForOthers } from './tenantScope.js';

/**
 * Queues again for this evaluation its builds completed or failed on a worker its organization
 * does not trust; one failed gets fresh attempts, as after a restart. `locked`: the caller took
 * lockScopedBuilds already, before its other locks.
 */
export async function claimForEvaluation(tx: TransactionSql, emit: Emit, evaluationId: string, locked = false): Promise<string[]> {
  if (!locked) await lockScopedBuilds(tx, { evaluationId });
  const others = await outcomesForOthers(tx, evaluationId);
  const requeued = await applyStatusChanges(tx, emit, others.map((o) => o.id), { event: { type: 'requeue', why: 'other_tenant' } });
  const failed = others.filter((o) => o.status === 'failed' && requeued.includes(o.id)).map((o) => o.id);
  await freshAttempts(tx, failed);
  return requeued;
}
