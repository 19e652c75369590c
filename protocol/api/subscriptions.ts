// Request bodies of cache subscriptions and their modes (0 read-write, 1 read-only, 2 write-only).
import { z } from 'zod';

/** 0 read-write (substitute and push), 1 read-only, 2 write-only (DESIGN.md, "The model"). */
export const SubscriptionMode = z.union([z.literal(0), z.literal(1), z.literal(2)]);
export type SubscriptionMode = z.infer<typeof SubscriptionMode>;

export const SubscribeBody = z.strictObject({ mode: SubscriptionMode.default(0) });
export type SubscribeBody = z.infer<typeof SubscribeBody>;
