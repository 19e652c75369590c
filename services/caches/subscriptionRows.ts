// Reading subscriptions and pending requests, for the project, organization and cache views.
import type { Fragment } from 'postgres';
import type { Queryable } from '../../storage/index.js';

export interface SubscriptionView {
  cache: string;
  mode: 0 | 1 | 2;
  /** project: the project's own; organization: inherited from its organization */
  via: 'project' | 'organization';
  state_managed: boolean;
  created_at: Date;
}

export interface SubscriptionRequestView {
  id: string;
  /** `org/project`, or null for an organization's request */
  project: string | null;
  organization: string;
  cache: string;
  mode: 0 | 1 | 2;
  requester: string | null;
  created_at: Date;
}

export interface ProjectSubscriptions {
  subscriptions: SubscriptionView[];
  requests: SubscriptionRequestView[];
}

export async function listProjectSubscriptions(sql: Queryable, projectId: string): Promise<ProjectSubscriptions> {
  const subscriptions = await sql<SubscriptionView[]>`
    select c.name as cache, s.mode, case when s.project_id is null then 'organization' else 'project' end as via, s.state_managed, s.created_at
    from subscriptions s join caches c on c.id = s.cache_id
    where s.project_id = ${projectId}
       or s.organization_id = (select organization_id from projects where id = ${projectId})
    order by c.name, via desc`;
  const requests = await requestRows(sql, sql`where r.project_id = ${projectId} order by r.created_at`);
  return { subscriptions, requests };
}

export async function listOrganizationSubscriptions(sql: Queryable, organizationId: string): Promise<{ subscriptions: SubscriptionView[]; requests: SubscriptionRequestView[] }> {
  const subscriptions = await sql<SubscriptionView[]>`
    select c.name as cache, s.mode, 'organization' as via, s.state_managed, s.created_at
    from subscriptions s join caches c on c.id = s.cache_id
    where s.organization_id = ${organizationId} order by c.name`;
  const requests = await requestRows(sql, sql`where r.organization_id = ${organizationId} order by r.created_at`);
  return { subscriptions, requests };
}

export async function listCacheRequests(sql: Queryable, cacheId: string): Promise<SubscriptionRequestView[]> {
  return requestRows(sql, sql`where r.cache_id = ${cacheId} order by r.created_at`);
}

export interface SubscriberView {
  project: string | null;
  organization: string;
  mode: 0 | 1 | 2;
  state_managed: boolean;
  created_at: Date;
}

export async function listCacheSubscribers(sql: Queryable, cacheId: string): Promise<SubscriberView[]> {
  return sql<SubscriberView[]>`
    select case when p.id is null then null else o.name || '/' || p.name end as project, o.name as organization,
           s.mode, s.state_managed, s.created_at
    from subscriptions s
    left join projects p on p.id = s.project_id
    join organizations o on o.id = coalesce(p.organization_id, s.organization_id)
    where s.cache_id = ${cacheId} order by o.name, project nulls first`;
}

/** Pending requests, filtered and ordered by the caller's fragment. */
function requestRows(sql: Queryable, where: Fragment): Promise<SubscriptionRequestView[]> {
  return sql<SubscriptionRequestView[]>`
    select r.id, case when p.id is null then null else o.name || '/' || p.name end as project, o.name as organization,
           c.name as cache, r.mode, u.username as requester, r.created_at
    from subscription_requests r
    left join projects p on p.id = r.project_id
    join organizations o on o.id = coalesce(p.organization_id, r.organization_id)
    join caches c on c.id = r.cache_id
    left join users u on u.id = r.requester_id
    ${where}`;
}
