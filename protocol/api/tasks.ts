// Request bodies and the view of task routes.
import { z } from 'zod';
import { ResourceName } from './names.js';

/** Seconds, at most 30 days; 0: no limit; null: the server's default (build.defaultTimeoutSecs / defaultMaxSilentSecs). */
const BuildLimitSecs = z.number().int().min(0).max(2_592_000).nullable();

export const CreateTaskBody = z.strictObject({
  name: ResourceName,
  description: z.string().max(2000).optional(),
  /** attribute wildcard; absent: the project's */
  wildcard: z.string().min(1).max(1000).optional(),
  branch: z.string().min(1).max(255).optional(),
  keep_evaluations: z.number().int().min(0).max(100000).optional(),
  requires_approval: z.boolean().optional(),
  /** the time limit of the task's builds whose derivation sets no `timeout` (kiln extension) */
  build_timeout_secs: BuildLimitSecs.optional(),
  /** the limit without output of the task's builds whose derivation sets no `maxSilent` (kiln extension) */
  build_max_silent_secs: BuildLimitSecs.optional(),
});
export type CreateTaskBody = z.infer<typeof CreateTaskBody>;

/** PATCH /tasks/{project}/{task} (kiln extension): the fields given change; null clears a nullable one. */
export const UpdateTaskBody = z.strictObject({
  description: z.string().max(2000).optional(),
  wildcard: z.string().min(1).max(1000).nullable().optional(),
  branch: z.string().min(1).max(255).nullable().optional(),
  keep_evaluations: z.number().int().min(0).max(100000).optional(),
  requires_approval: z.boolean().optional(),
  build_timeout_secs: BuildLimitSecs.optional(),
  build_max_silent_secs: BuildLimitSecs.optional(),
}).refine((body) => Object.keys(body).length > 0, { message: 'name at least one field to change' });
export type UpdateTaskBody = z.infer<typeof UpdateTaskBody>;

/** A task as GET /tasks/{project}…, the star routes and project details answer it. */
export const TaskView = z.strictObject({
  id: z.uuid(),
  name: ResourceName,
  description: z.string(),
  wildcard: z.string().nullable(),
  branch: z.string().nullable(),
  keep_evaluations: z.number().int(),
  requires_approval: z.boolean(),
  build_timeout_secs: z.number().int().nullable(),
  build_max_silent_secs: z.number().int().nullable(),
  created_at: z.iso.datetime({ offset: true }),
  stars: z.number().int(),
  /** whether the caller starred it */
  starred: z.boolean(),
});
export type TaskView = z.infer<typeof TaskView>;
