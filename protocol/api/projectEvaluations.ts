// A project's evaluations, newest first, a page at a time (GET /projects/{org}/{project}/evaluations).
import { z } from 'zod';
import { EvaluationPhase } from '../events/buildEvents.js';
import { EvaluationTrigger } from './evaluations.js';

/**
 * ?page=&per_page= (50 by default, at most 200, as every paged list of the API), and filters:
 * only the evaluations of one branch, one pull request or one trigger.
 */
export const ProjectEvaluationsQuery = z.strictObject({
  page: z.coerce.number().int().min(1).max(1_000_000).default(1),
  per_page: z.coerce.number().int().min(1).max(200).default(50),
  branch: z.string().min(1).max(255).optional(),
  pull_request: z.coerce.number().int().min(1).max(2_147_483_647).optional(),
  trigger: EvaluationTrigger.optional(),
});
export type ProjectEvaluationsQuery = z.infer<typeof ProjectEvaluationsQuery>;

/** One row of the list: enough to tell evaluations apart and open one at /evals/{id}. */
export const EvaluationSummary = z.strictObject({
  id: z.uuid(),
  task: z.string(),
  commit: z.string().nullable(),
  attr: z.string(),
  trigger: EvaluationTrigger,
  branch: z.string().nullable(),
  pull_request: z.number().int().nullable(),
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
