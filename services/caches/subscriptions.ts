// Subscriptions of projects and organizations to caches (spec, "States and transitions"):
//   none → active            caller holds manageSubscriptions on the subscriber and manageCacheSubscriptions on the cache
//   none → pending request   caller lacks manageCacheSubscriptions: "Subscription requested", grants nothing
//   pending → active         a cache admin approves (manageCacheSubscriptions)
//   pending → deleted        a cache admin denies, or the subscriber cancels (DELETE on the subscribe path)
// An organization's subscription applies to all its projects, under the same rule with
// manageSubscriptions on the organization (DESIGN.md).
import { ApiError, type SubscriptionMode } from '../../protocol/index.js';
import { accessOf, notFound, userIdOf } from '../access/index.js';
import type { AccessDeps } from '../access/index.js';
import { cacheRowNamed, type Emit } from '../../storage/index.js';
import type { Principal } from '../access/index.js';
import type { Queryable } from '../../storage/index.js';
import { demandNotStateManaged } from '../access/index.js';
import {
  listCacheRequests, listCacheSubscribers, listOrganizationSubscriptions, listProjectSubscriptions,
  type ProjectSubscriptions, type SubscriberView, type SubscriptionRequestView,
} from './subscriptionRows.js';
import { cacheTarget, demandCache, demandOrganization, demandProjectRef, findCache, isUuid } from '../access/index.js';

export const SUBSCRIBED = 'Subscribed';
export const SUBSCRIPTION_REQUESTED = 'Subscription requested';

/** Who subscribes: a project or an organization, as the columns of both tables name it. */
interface Subscriber {
  column: 'project_id' | 'organization_id';
  id: string;
  label: string;
}

/** How the subscription events name a subscriber: `org/project` or the organization's name, with the scope. */
async function subscriberEvent(tx: Queryable, subscriber: Subscriber) {
  if (subscriber.column === 'project_id') {
    const [p] = await tx<{ organization_id: string; label: string }[]>`
      select p.organization_id, o.name || '/' || p.name as label from projects p join organizations o on o.id = p.organization_id where p.id = ${subscriber.id}`;
    return { kind: 'project' as const, name: p!.label, scope: { organizationId: p!.organization_id, projectId: subscriber.id } };
  }
  const [o] = await tx<{ name: string }[]>`select name from organizations where id = ${subscriber.id}`;
  return { kind: 'organization' as const, name: o!.name, scope: { organizationId: subscriber.id } };
}

type SubscriptionChange = 'create' | 'delete' | 'request';

/**
 * project.subscription.<change> to the project (organization.subscription.<change> for an
 * organization), and for a request, approval or denial the cache.subscription.* event to the cache.
 */
async function emitSubscription(
  tx: Queryable, emit: Emit, subscriber: Subscriber, cache: { id: string; name: string }, change: SubscriptionChange | null,
  cacheChange: 'request' | 'approve' | 'deny' | null, extra: { mode?: number; request?: boolean } = {},
): Promise<void> {
  const who = await subscriberEvent(tx, subscriber);
  if (change) {
    if (who.kind === 'project') emit(`project.subscription.${change}`, { project: who.name, cache: cache.name, ...extra }, who.scope);
    else emit(`organization.subscription.${change}`, { organization: who.name, cache: cache.name, ...extra }, who.scope);
  }
  if (cacheChange) {
    emit(`cache.subscription.${cacheChange}`, { cache: cache.name, [who.kind]: who.name, ...(extra.mode === undefined ? {} : { mode: extra.mode }) }, { cacheId: cache.id });
  }
}

export function subscriptionsService({ sql, onSubscriptionApproved, log, events }: AccessDeps) {
  /** Tells the evaluation side that these projects may now have the cache they waited for. */
  async function announce(tx: Queryable, subscriber: Subscriber): Promise<void> {
    const projects = subscriber.column === 'project_id'
      ? [{ id: subscriber.id }]
      : await tx<{ id: string }[]>`select id from projects where organization_id = ${subscriber.id}`;
    for (const p of projects) {
      try {
        await onSubscriptionApproved(p.id);
      } catch (e) {
        log.error({ err: e, project: p.id }, 'onSubscriptionApproved failed');
      }
    }
  }

  async function activate(subscriber: Subscriber, cache: { id: string; name: string }, mode: SubscriptionMode, approved: boolean): Promise<void> {
    const cacheId = cache.id;
    await events.transaction(async (tx, emit) => {
      const [existing] = await tx<{ state_managed: boolean }[]>`
        select state_managed from subscriptions where ${tx(subscriber.column)} = ${subscriber.id} and cache_id = ${cacheId} for update`;
      if (existing) {
        demandNotStateManaged(existing, `the subscription of ${subscriber.label}`);
        await tx`update subscriptions set mode = ${mode} where ${tx(subscriber.column)} = ${subscriber.id} and cache_id = ${cacheId}`;
      } else {
        await tx`insert into subscriptions (${tx(subscriber.column)}, cache_id, mode) values (${subscriber.id}, ${cacheId}, ${mode})`;
      }
      await tx`delete from subscription_requests where ${tx(subscriber.column)} = ${subscriber.id} and cache_id = ${cacheId}`;
      await emitSubscription(tx, emit, subscriber, cache, 'create', approved ? 'approve' : null, { mode });
    });
  }

  async function subscribe(who: Principal, subscriber: Subscriber, cacheName: string, mode: SubscriptionMode): Promise<string> {
    const cache = await findCache(sql, who, cacheName);
    const access = cache ? accessOf(who, cacheTarget(cache)) : null;
    // A private cache the caller cannot see is not revealed, not even by a refused request.
    if (!cache || !access?.visible) throw notFound(`cache "${cacheName}"`);
    if (access.permissions.has('manageCacheSubscriptions')) {
      await activate(subscriber, cache, mode, false);
      await announce(sql, subscriber);
      return SUBSCRIBED;
    }
    const [active] = await sql<{ mode: number }[]>`
      select mode from subscriptions where ${sql(subscriber.column)} = ${subscriber.id} and cache_id = ${cache.id}`;
    if (active?.mode === mode) return SUBSCRIBED;
    await events.transaction(async (tx, emit) => {
      await tx`
        insert into subscription_requests (${tx(subscriber.column)}, cache_id, mode, requester_id)
        values (${subscriber.id}, ${cache.id}, ${mode}, ${userIdOf(who)})
        on conflict (${tx(subscriber.column)}, cache_id) where ${tx(subscriber.column)} is not null
        do update set mode = excluded.mode, requester_id = excluded.requester_id`;
      await emitSubscription(tx, emit, subscriber, cache, 'request', 'request', { mode });
    });
    return SUBSCRIPTION_REQUESTED;
  }

  /** Ends a subscription and cancels a pending request; 404 not_subscribed when there was neither. */
  async function unsubscribe(subscriber: Subscriber, cacheName: string): Promise<string> {
    return events.transaction(async (tx, emit) => {
      const cache = await cacheRowNamed(tx, null, cacheName);
      const [existing] = cache
        ? await tx<{ state_managed: boolean }[]>`
            select state_managed from subscriptions where ${tx(subscriber.column)} = ${subscriber.id} and cache_id = ${cache.id} for update`
        : [];
      if (existing) demandNotStateManaged(existing, `the subscription of ${subscriber.label}`);
      const ended = cache ? await tx`delete from subscriptions where ${tx(subscriber.column)} = ${subscriber.id} and cache_id = ${cache.id} returning id` : [];
      const cancelled = cache ? await tx`delete from subscription_requests where ${tx(subscriber.column)} = ${subscriber.id} and cache_id = ${cache.id} returning id` : [];
      if (ended.length === 0 && cancelled.length === 0) {
        throw new ApiError('not_subscribed', `${subscriber.label} neither subscribes to nor asked for cache "${cacheName}"`);
      }
      // A cancelled request is reported as a delete with request: true.
      await emitSubscription(tx, emit, subscriber, cache!, 'delete', null, ended.length > 0 ? {} : { request: true });
      return ended.length > 0 ? 'Unsubscribed' : 'Subscription request cancelled';
    });
  }

  async function projectSubscriber(who: Principal, project: string, permission: 'viewProject' | 'manageSubscriptions'): Promise<Subscriber> {
    const { row, target } = await demandProjectRef(sql, who, project, permission);
    return { column: 'project_id', id: row.id, label: target.label };
  }
  async function organizationSubscriber(who: Principal, org: string, permission: 'viewOrg' | 'manageSubscriptions'): Promise<Subscriber> {
    const { row, target } = await demandOrganization(sql, who, org, permission);
    return { column: 'organization_id', id: row.id, label: target.label };
  }

  async function pendingRequest(who: Principal, cacheName: string, id: string) {
    const { row: cache } = await demandCache(sql, who, cacheName, 'manageCacheSubscriptions');
    const [request] = isUuid(id)
      ? await sql<{ id: string; project_id: string | null; organization_id: string | null; mode: SubscriptionMode }[]>`
          select id, project_id, organization_id, mode from subscription_requests where id = ${id} and cache_id = ${cache.id}`
      : [];
    if (!request) throw new ApiError('not_found', `no subscription request ${id} for cache "${cache.name}"`);
    const subscriber: Subscriber = request.project_id
      ? { column: 'project_id', id: request.project_id, label: `project ${request.project_id}` }
      : { column: 'organization_id', id: request.organization_id!, label: `organization ${request.organization_id}` };
    return { cache, request, subscriber };
  }

  return {
    async subscribeProject(who: Principal, project: string, cache: string, mode: SubscriptionMode): Promise<string> {
      return subscribe(who, await projectSubscriber(who, project, 'manageSubscriptions'), cache, mode);
    },
    async unsubscribeProject(who: Principal, project: string, cache: string): Promise<string> {
      return unsubscribe(await projectSubscriber(who, project, 'manageSubscriptions'), cache);
    },
    async listProject(who: Principal, project: string): Promise<ProjectSubscriptions> {
      return listProjectSubscriptions(sql, (await projectSubscriber(who, project, 'viewProject')).id);
    },

    async subscribeOrganization(who: Principal, org: string, cache: string, mode: SubscriptionMode): Promise<string> {
      return subscribe(who, await organizationSubscriber(who, org, 'manageSubscriptions'), cache, mode);
    },
    async unsubscribeOrganization(who: Principal, org: string, cache: string): Promise<string> {
      return unsubscribe(await organizationSubscriber(who, org, 'manageSubscriptions'), cache);
    },
    async listOrganization(who: Principal, org: string) {
      return listOrganizationSubscriptions(sql, (await organizationSubscriber(who, org, 'viewOrg')).id);
    },

    /** The cache's pending requests (the cache's Subscriptions page). */
    async listRequests(who: Principal, cache: string): Promise<SubscriptionRequestView[]> {
      const { row } = await demandCache(sql, who, cache, 'manageCacheSubscriptions');
      return listCacheRequests(sql, row.id);
    },

    async listSubscribers(who: Principal, cache: string): Promise<SubscriberView[]> {
      const { row } = await demandCache(sql, who, cache, 'manageCacheSubscriptions');
      return listCacheSubscribers(sql, row.id);
    },

    /** Turns the request into an active subscription with the requested mode. */
    async approve(who: Principal, cache: string, id: string): Promise<string> {
      const { cache: row, request, subscriber } = await pendingRequest(who, cache, id);
      await activate(subscriber, row, request.mode, true);
      await announce(sql, subscriber);
      return SUBSCRIBED;
    },

    /** Deletes the request; the subscriber may ask again. */
    async deny(who: Principal, cache: string, id: string): Promise<string> {
      const { cache: row, request, subscriber } = await pendingRequest(who, cache, id);
      await events.transaction(async (tx, emit) => {
        const deleted = await tx`delete from subscription_requests where id = ${request.id} returning id`;
        if (deleted.length > 0) await emitSubscription(tx, emit, subscriber, row, null, 'deny', { mode: request.mode });
      });
      return 'Subscription request denied';
    },
  };
}
export type SubscriptionsService = ReturnType<typeof subscriptionsService>;

