// Request bodies and the view of task routes.
import { z } from 'zod';
import { ResourceName } from './names.js';

export const CreateTaskBody = z.strictObject({
  name: ResourceName,
  description: z.string().max(2000).optional(),
  /** attribute wildcard; absent: the project's */
  wildcard: z.string().min(1).max(1000).optional(),
  branch: z.string().min(1).max(255).optional(),
  keep_evaluations: z.number().int().min(0).max(100000).optional(),
  requires_approval: z.boolean().optional(),
});
export type CreateTaskBody = z.infer<typeof CreateTaskBody>;

/** A task as GET /tasks/{project}…, the star routes and project details answer it. */
export const TaskView = z.strictObject({
  id: z.uuid(),
  name: ResourceName,
  description: z.string(),
  wildcard: z.string().nullable(),
  branch: z.string().nullable(),
  keep_evaluations: z.number().int(),
  requires_approval: z.boolean(),
  created_at: z.iso.datetime({ offset: true }),
  stars: z.number().int(),
  /** whether the caller starred it */
  starred: z.boolean(),
});
export type TaskView = z.infer<typeof TaskView>;
