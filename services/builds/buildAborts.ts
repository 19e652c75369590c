// Aborting an evaluation (docs/builds.md, "Aborting"): the builds it has running that no other open
// evaluation wants move started → aborted, with build.aborted for the aborted evaluation's build,
// in the database first. Every server process's scheduler then cancels its own jobs of aborted
// builds on their workers (jobCancellations.ts, on every pass), so the abort reaches a job whichever
// process dispatched it, and a result that still arrives finds the build no longer started.
// A build another open evaluation still wants keeps running for it.
import type { Sql } from 'postgres';
import type { Events } from '../../storage/index.js';
import { applyStatusChange } from './buildStatus.js';

const FINAL_PHASES = ['completed', 'failed', 'aborted'];

/** Moves the evaluation's started builds that no open evaluation wants to `aborted`; their ids. */
export async function abortUnwantedBuilds(events: Events, sql: Sql, evaluationId: string): Promise<string[]> {
  const started = await sql<{ id: string }[]>`
    select db.id from builds b join derivation_builds db on db.id = b.derivation_build_id
    where b.evaluation_id = ${evaluationId} and db.status = 'started'`;
  const aborted: string[] = [];
  for (const { id } of started) {
    const applied = await events.transaction(async (tx, emit) => {
      // Under the row's lock, so an evaluation that records this build meanwhile is either seen
      // here or finds it aborted and queues it again (graphRecorder.ts).
      const [unwanted] = await tx<{ id: string }[]>`
        select db.id from derivation_builds db where db.id = ${id} and db.status = 'started'
          and not exists (
            select 1 from builds other join evaluations e on e.id = other.evaluation_id
            where other.derivation_build_id = db.id and other.evaluation_id <> ${evaluationId} and e.phase <> all(${FINAL_PHASES}))
        for update`;
      if (!unwanted) return null;
      return applyStatusChange(tx, emit, id, {
        event: { type: 'abort' }, evaluationId,
        failure: { class: 'FailedTransient', reason: 'cancelled', message: `evaluation ${evaluationId} was aborted while this build ran` },
      });
    });
    if (applied !== null) aborted.push(id);
  }
  return aborted;
}

/** Which of these derivation builds are aborted (the scheduler's jobs to cancel). */
export async function abortedAmong(sql: Sql, derivationBuildIds: readonly string[]): Promise<Set<string>> {
  if (derivationBuildIds.length === 0) return new Set();
  const rows = await sql<{ id: string }[]>`select id from derivation_builds where id = any(${derivationBuildIds as string[]}::uuid[]) and status = 'aborted'`;
  return new Set(rows.map((r) => r.id));
}
