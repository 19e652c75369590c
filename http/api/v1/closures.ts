// ClosureGraph views (spec: Evaluations and builds): the build-time closure and the runtime closure
// of one build or of an evaluation's entry points.
import { BuildId, EvaluationId } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import type { Router } from '../../router.js';

export function closuresRoutes(r: Router<Principal>, { builds: { data: { closures } } }: Pick<Services, 'builds'>): void {
  r.get('/builds/:build/closure', (req) => closures.build(req.principal, req.param('build', BuildId), false));
  r.get('/builds/:build/runtime-closure', (req) => closures.build(req.principal, req.param('build', BuildId), true));
  r.get('/evals/:evaluation/closure', (req) => closures.evaluation(req.principal, req.param('evaluation', EvaluationId), false));
  r.get('/evals/:evaluation/runtime-closure', (req) => closures.evaluation(req.principal, req.param('evaluation', EvaluationId), true));
}
