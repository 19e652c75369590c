// Request bodies of task routes.
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
