// The stored series besides cache traffic (docs/metrics.md, "Stored metrics"): a worker's samples
// (superusers, or manageWorkers on a project it connected for), the instance window and the job
// phase rollups (superusers), the worker and instance rollups (read as their raw rows) and a
// project's evaluations and build times (viewProject).
import { MetricsWindowQuery, PeriodWindowQuery, ProjectMetricsQuery, ProjectName, ResourceName } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import type { Router } from '../../router.js';

export function storedMetricsRoutes(r: Router<Principal>, { storedMetrics }: Pick<Services, 'storedMetrics'>): void {
  r.get('/workers/:worker/samples', (req) => storedMetrics.workers.series(req.principal, req.param<string>('worker'), req.query(MetricsWindowQuery)));
  r.get('/metrics/instance', (req) => storedMetrics.instance.series(req.principal, req.query(MetricsWindowQuery)));
  r.get('/workers/:worker/rollups', (req) => storedMetrics.rollups.worker(req.principal, req.param<string>('worker'), req.query(PeriodWindowQuery)));
  r.get('/metrics/instance/rollups', (req) => storedMetrics.rollups.instance(req.principal, req.query(PeriodWindowQuery)));
  r.get('/metrics/phases', (req) => storedMetrics.phases.series(req.principal, req.query(PeriodWindowQuery)));
  r.get('/projects/:org/:project/metrics', (req) => storedMetrics.projects.series(req.principal, req.param('org', ResourceName), req.param('project', ProjectName), req.query(ProjectMetricsQuery)));
}
