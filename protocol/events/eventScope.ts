// What an event concerns, by id: which webhooks may receive it (a project's, a cache's) and which
// live topics carry it (a task's, an evaluation's, a build's). Not part of the envelope.
import { z } from 'zod';

export const EventScope = z.strictObject({
  organizationId: z.uuid().optional(),
  projectId: z.uuid().optional(),
  taskId: z.uuid().optional(),
  evaluationId: z.uuid().optional(),
  buildId: z.uuid().optional(),
  cacheId: z.uuid().optional(),
  userId: z.uuid().optional(),
});
export type EventScope = z.infer<typeof EventScope>;
