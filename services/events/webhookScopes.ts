// Who may manage which webhooks (spec: Webhooks): a project's need manageWebhooks on the project, a
// cache's manageCacheWebhooks on the cache, the instance's a superuser. A caller who cannot see the
// project or cache gets 404, as everywhere.
import { ApiError, type EventScope } from '../../protocol/index.js';
import type { WebhookScope } from '../../storage/index.js';
import { isSuperuser, superuserRefusal, type Principal } from '../access/index.js';
import type { Queryable } from '../../storage/index.js';
import { demandCache, demandProjectRef } from '../access/index.js';

export type WebhookScopeRef = { kind: 'project'; project: string } | { kind: 'cache'; cache: string } | { kind: 'instance' };

export interface ResolvedWebhookScope {
  scope: WebhookScope;
  /** the scope of the events kiln emits about this scope (webhook.ping) */
  eventScope: EventScope;
  /** "org/project" or the cache name, for views and pings */
  project?: string;
  cache?: string;
}

/** The seam the webhook service checks permissions through; tests and the lead may pass another. */
export type WebhookAuthorizer = (who: Principal, ref: WebhookScopeRef) => Promise<ResolvedWebhookScope>;

export function accessWebhookAuthorizer(sql: Queryable): WebhookAuthorizer {
  return async (who, ref) => {
    if (ref.kind === 'project') {
      const { row } = await demandProjectRef(sql, who, ref.project, 'manageWebhooks');
      return { scope: { kind: 'project', projectId: row.id }, eventScope: { projectId: row.id, organizationId: row.organization_id }, project: `${row.organization}/${row.name}` };
    }
    if (ref.kind === 'cache') {
      const { row } = await demandCache(sql, who, ref.cache, 'manageCacheWebhooks');
      return { scope: { kind: 'cache', cacheId: row.id }, eventScope: { cacheId: row.id }, cache: row.name };
    }
    if (who.kind !== 'user') throw new ApiError('unauthorized', 'this needs a signed-in user');
    // isSuperuser: a superuser's key needs admin and no pin (spec: Authentication 4).
    if (!isSuperuser(who)) throw new ApiError('forbidden', superuserRefusal(who, 'instance webhooks are for superusers'));
    return { scope: { kind: 'instance' }, eventScope: {} };
  };
}
