// evaluation.progress (spec: Live updates): the counts of an evaluation's builds, live-only. Build
// status changes come by the thousand in a big evaluation, so the scheduler only notes which
// derivation_builds changed; once a second one grouped query counts the builds of every
// evaluation that uses them (the last count comes after the evaluation completed), and each such
// evaluation gets one event.
import type { Sql } from 'postgres';
import type { EvaluationPhase } from '../../protocol/index.js';
import type { Events } from '../../storage/index.js';
import { statusFor } from './organizationStatus.js';

interface Counts {
  evaluation_id: string;
  project_id: string;
  organization_id: string;
  task_id: string;
  project: string;
  task: string;
  phase: EvaluationPhase;
  total: number;
  done: number;
  failed: number;
  substituted: number;
}

export class EvaluationProgress {
  private changed = new Set<string>();
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;
  /** grows with the cost of the count, so a huge evaluation does not keep the database busy counting */
  private delayMs: number;

  constructor(
    private readonly sql: Sql,
    private readonly events: Pick<Events, 'publish'>,
    private readonly onError: (error: unknown) => void,
    private readonly intervalMs = 1000,
  ) {
    this.delayMs = intervalMs;
  }

  /** These derivation_builds changed status. */
  touched(...derivationBuildIds: string[]): void {
    for (const id of derivationBuildIds) this.changed.add(id);
    if (this.timer === null && this.changed.size > 0) {
      this.timer = setTimeout(() => {
        this.timer = null;
        this.flushing = this.flush().catch(this.onError).finally(() => (this.flushing = null));
      }, this.delayMs);
      this.timer.unref();
    }
  }

  async stop(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.flushing;
  }

  /** Publishes the counts of every evaluation that uses a changed build. */
  async flush(): Promise<void> {
    const ids = [...this.changed];
    this.changed = new Set();
    if (ids.length === 0) return;
    const started = Date.now();
    // Each evaluation counts its builds as its organization sees them (organizationStatus.ts). The
    // builds are counted per evaluation first and the names joined to the few groups after: grouped
    // by the names, every build's row carried them into a sort (issue 23: 2.9× the time, docs/builds.md).
    const status = statusFor(this.sql, this.sql`ev.organization_id`);
    const rows = await this.sql<Counts[]>`
      with touched as (select distinct evaluation_id from builds where derivation_build_id = any(${ids}::uuid[])),
      ev as materialized (
        select e.id, e.phase, t.id as task_id, t.name as task, p.id as project_id, p.organization_id, o.name || '/' || p.name as project
        from touched x join evaluations e on e.id = x.evaluation_id
        join tasks t on t.id = e.task_id join projects p on p.id = t.project_id join organizations o on o.id = p.organization_id),
      counts as (
        select b.evaluation_id,
               count(*)::int as total,
               count(*) filter (where ${status} in ('completed', 'failed', 'substituted', 'aborted'))::int as done,
               count(*) filter (where ${status} = 'failed')::int as failed,
               count(*) filter (where ${status} = 'substituted')::int as substituted
        from ev join builds b on b.evaluation_id = ev.id join derivation_builds db on db.id = b.derivation_build_id
        group by b.evaluation_id)
      select ev.id as evaluation_id, ev.project_id, ev.organization_id, ev.task_id, ev.project, ev.task, ev.phase,
             c.total, c.done, c.failed, c.substituted
      from ev join counts c on c.evaluation_id = ev.id
      order by ev.id`;
    for (const r of rows) {
      this.events.publish('evaluation.progress', {
        evaluation_id: r.evaluation_id, project: r.project, task: r.task, phase: r.phase,
        builds_total: r.total, builds_done: r.done, builds_failed: r.failed, builds_substituted: r.substituted,
      }, { projectId: r.project_id, organizationId: r.organization_id, taskId: r.task_id, evaluationId: r.evaluation_id });
    }
    // at most a tenth of the time spent counting
    this.delayMs = Math.min(30_000, Math.max(this.intervalMs, (Date.now() - started) * 10));
  }
}
