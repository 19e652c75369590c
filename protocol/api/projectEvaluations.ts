// A project's evaluations, newest first, a page at a time (GET /projects/{org}/{project}/evaluations).
import { z } from 'zod';
import { EvaluationPhase } from '../events/buildEvents.js';

/** ?page=&per_page= (50 by default, at most 200, as every paged list of the API). */
export const ProjectEvaluationsQuery = z.strictObject({
  page: z.coerce.number().int().min(1).max(1_000_000).default(1),
  per_page: z.coerce.number().int().min(1).max(200).default(50),
});
export type ProjectEvaluationsQuery = z.infer<typeof ProjectEvaluationsQuery>;

/** One row of the list: enough to tell evaluations apart and open one at /evals/{id}. */
export const EvaluationSummary = z.strictObject({
  id: z.uuid(),
  task: z.string(),
  commit: z.string().nullable(),
  attr: z.string(),
  phase: EvaluationPhase,
  error: z.string().nullable(),
  created_at: z.iso.datetime({ offset: true }),
  finished_at: z.iso.datetime({ offset: true }).nullable(),
});
export type EvaluationSummary = z.infer<typeof EvaluationSummary>;

export const ProjectEvaluationsPage = z.strictObject({
  evaluations: z.array(EvaluationSummary),
  page: z.number().int(),
  per_page: z.number().int(),
  total: z.number().int(),
});
export type ProjectEvaluationsPage = z.infer<typeof ProjectEvaluationsPage>;
