// Evaluations: start, list a project's, read, abort, their builds (all, or a page at a time); entry points and the store path of an attribute at a commit.
import { z } from 'zod';
import { CommitId, EvaluateTaskBody, EvaluationActionBody, EvaluationBuildsQuery, EvaluationId, ProjectEvaluationsQuery, ProjectName, ProjectRef, ResourceName } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import type { Req } from '../../request.js';
import type { Router } from '../../router.js';

export const AttributeAtCommitQuery = z.object({ commit: CommitId, attr: z.string().min(1).max(1000) });
export const EntryPointsQuery = z.object({ evaluation_id: EvaluationId.optional() });

export function evaluationsRoutes(r: Router<Principal>, { builds: { evaluations, views } }: Pick<Services, 'builds'>): void {
  const org = (req: Req<Principal>) => req.param('org', ResourceName);
  const project = (req: Req<Principal>) => req.param('project', ProjectName);
  const projectRef = (req: Req<Principal>) => req.param('project', ProjectRef);
  const task = (req: Req<Principal>) => req.param('task', ResourceName);
  const id = (req: Req<Principal>) => req.param('id', EvaluationId);

  r.post('/projects/:org/:project/evaluate', (req) => evaluations.evaluateProject(req.principal, org(req), project(req)));
  r.get('/projects/:org/:project/evaluations', (req) => evaluations.listProject(req.principal, org(req), project(req), req.query(ProjectEvaluationsQuery)));
  r.get('/projects/:org/:project/entry-points', (req) => views.projectEntryPoints(req.principal, org(req), project(req)));
  r.post('/tasks/:project/:task/evaluate', async (req) =>
    evaluations.evaluateTask(req.principal, projectRef(req), task(req), await req.body(EvaluateTaskBody)));
  r.get('/tasks/:project/:task/evaluations', (req) => {
    const [ref, name] = [projectRef(req), task(req)];
    const { commit, attr } = req.query(AttributeAtCommitQuery);
    return views.attributeAtCommit(req.principal, ref, name, commit, attr);
  });
  r.get('/tasks/:project/:task/entry-points', (req) =>
    views.taskEntryPoints(req.principal, projectRef(req), task(req), req.query(EntryPointsQuery).evaluation_id ?? null));
  r.get('/evals/:id', (req) => evaluations.get(req.principal, id(req)));
  r.post('/evals/:id', async (req) => {
    const evaluation = id(req);
    const { method } = await req.body(EvaluationActionBody);
    if (method === 'approve') return evaluations.approve(req.principal, evaluation);
    return method === 'abort' ? evaluations.abort(req.principal, evaluation) : evaluations.restart(req.principal, evaluation);
  });
  r.get('/evals/:id/builds', (req) => views.evaluationBuilds(req.principal, id(req)));
  r.get('/evals/:id/builds/page', (req) => {
    const evaluation = id(req);
    return views.evaluationBuildsPage(req.principal, evaluation, req.query(EvaluationBuildsQuery));
  });
}
