// Request bodies of the evaluation endpoints (spec: "Projects and tasks", "Evaluations and builds").
import { z } from 'zod';

/** a full git commit id: 40 (SHA-1) or 64 (SHA-256) lowercase hex digits */
export const CommitId = z.string().regex(/^([0-9a-f]{40}|[0-9a-f]{64})$/, 'a commit is 40 or 64 lowercase hex digits');

/** POST /tasks/{project}/{task}/evaluate: without commit, the head of the task's branch; without attr, the task's wildcard */
export const EvaluateTaskBody = z.object({
  commit: CommitId.optional(),
  attr: z.string().min(1).max(1000).optional(),
});
export type EvaluateTaskBody = z.infer<typeof EvaluateTaskBody>;

/** POST /evals/{id} */
export const EvaluationActionBody = z.object({ method: z.literal('abort') });
export type EvaluationActionBody = z.infer<typeof EvaluationActionBody>;

export const EvaluationId = z.uuid({ message: 'an evaluation id is a UUID' });
export const BuildId = z.uuid({ message: 'a build id is a UUID' });
