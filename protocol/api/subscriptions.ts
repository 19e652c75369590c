// Request bodies and views of cache subscriptions and their modes (0 read-write, 1 read-only, 2 write-only).
import { z } from 'zod';

/** 0 read-write (substitute and push), 1 read-only, 2 write-only (DESIGN.md, "The model"). */
export const SubscriptionMode = z.union([z.literal(0), z.literal(1), z.literal(2)]);
export type SubscriptionMode = z.infer<typeof SubscriptionMode>;

export const SubscribeBody = z.strictObject({ mode: SubscriptionMode.default(0) });
export type SubscribeBody = z.infer<typeof SubscribeBody>;

const Timestamp = z.iso.datetime({ offset: true });

/** A cache subscription of a project or organization. */
export const SubscriptionView = z.strictObject({
  cache: z.string(),
  mode: SubscriptionMode,
  /** project: the project's own; organization: inherited from its organization */
  via: z.enum(['project', 'organization']),
  state_managed: z.boolean(),
  created_at: Timestamp,
});
export type SubscriptionView = z.infer<typeof SubscriptionView>;

/** A pending subscription request, waiting for the cache's approval. */
export const SubscriptionRequestView = z.strictObject({
  id: z.uuid(),
  /** `org/project`, or null for an organization's request */
  project: z.string().nullable(),
  organization: z.string(),
  cache: z.string(),
  mode: SubscriptionMode,
  requester: z.string().nullable(),
  created_at: Timestamp,
});
export type SubscriptionRequestView = z.infer<typeof SubscriptionRequestView>;

/** GET /orgs/{org}/subscribe and /projects/{project}/subscribe. */
export const SubscriptionsView = z.strictObject({
  subscriptions: z.array(SubscriptionView),
  requests: z.array(SubscriptionRequestView),
});
export type SubscriptionsView = z.infer<typeof SubscriptionsView>;

/** A project or organization subscribed to a cache (GET /caches/{cache}/subscriptions). */
export const SubscriberView = z.strictObject({
  /** `org/project`, or null when the whole organization subscribes */
  project: z.string().nullable(),
  organization: z.string(),
  mode: SubscriptionMode,
  state_managed: z.boolean(),
  created_at: Timestamp,
});
export type SubscriberView = z.infer<typeof SubscriberView>;
