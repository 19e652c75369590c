// GET /health's answer: the server is up and its database answers.
import { z } from 'zod';

export const HealthView = z.strictObject({
  status: z.literal('ok'),
  version: z.string(),
  started_at: z.iso.datetime({ offset: true }),
});
export type HealthView = z.infer<typeof HealthView>;
