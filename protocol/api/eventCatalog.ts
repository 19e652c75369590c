// GET /events/catalog's answer: every event kiln emits, its durability and the JSON Schema of its content.
import { z } from 'zod';

export const CatalogEntryView = z.strictObject({
  name: z.string(),
  family: z.string(),
  durable: z.boolean(),
  /** always, never, or entry_points (build.<status> is durable for entry points only) */
  durability: z.enum(['always', 'never', 'entry_points']),
  /** instance: delivered to instance webhooks only */
  audience: z.enum(['scope', 'instance']),
  description: z.string(),
  /** JSON Schema of the content */
  content: z.record(z.string(), z.unknown()),
});
export type CatalogEntryView = z.infer<typeof CatalogEntryView>;
