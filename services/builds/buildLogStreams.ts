// The streamed logs (docs/builds.md, "Logs"): POST /evals/{id}/builds writes every stored log of an
// evaluation's builds as NDJSON; POST /builds/{id}/log follows one build's log live until the
// build is final. Both read in short pages, so a slow client never holds a database connection.
import type { Sql } from 'postgres';
import type { BuildLogFeed } from './buildLogFeed.js';
import type { BuildLogs } from './buildLogs.js';
import type { BuildViewsService } from './buildViews.js';
import type { EvaluationsService } from './evaluations.js';
import type { Principal } from '../access/index.js';
import { organizationOfEvaluation, statusFor } from './organizationStatus.js';

const FINAL = new Set(['completed', 'failed', 'substituted', 'aborted']);
const BUILD_PAGE = 200;
const CHUNK_PAGE = 16;

export interface BuildLogStreamsDeps {
  sql: Sql;
  evaluations: Pick<EvaluationsService, 'visible'>;
  views: Pick<BuildViewsService, 'build'>;
  feed: BuildLogFeed;
  /** the log this process is receiving (absent in a process that only serves HTTP) */
  logs?: Pick<BuildLogs, 'tail'>;
}

interface LogBuildRow {
  build_id: string;
  derivation_build: string;
  drv_path: string;
  status: string;
  log_bytes: string;
}

const line = (value: unknown): Buffer => Buffer.from(`${JSON.stringify(value)}\n`);

export function buildLogStreams({ sql, evaluations, views, feed, logs }: BuildLogStreamsDeps) {
  async function* evaluationLogs(evaluationId: string): AsyncGenerator<Uint8Array> {
    let after = '';
    for (;;) {
      const builds = await sql<LogBuildRow[]>`
        select b.id as build_id, db.id as derivation_build, d.drv_path, ${statusFor(sql, organizationOfEvaluation(sql, sql`${evaluationId}::uuid`))} as status, db.log_bytes
        from builds b join derivation_builds db on db.id = b.derivation_build_id join derivations d on d.id = db.derivation_id
        where b.evaluation_id = ${evaluationId} and d.drv_path > ${after}
        order by d.drv_path limit ${BUILD_PAGE}`;
      for (const b of builds) {
        const who = { build_id: b.build_id, derivation_build: b.derivation_build, drv_path: b.drv_path };
        let position = { attempt: 0, seq: -1 };
        for (;;) {
          const chunks = await sql<{ attempt: number; seq: number; data: Buffer }[]>`
            select attempt, seq, data from build_log_chunks
            where derivation_build_id = ${b.derivation_build} and (attempt, seq) > (${position.attempt}, ${position.seq})
            order by attempt, seq limit ${CHUNK_PAGE}`;
          for (const c of chunks) yield line({ type: 'log', ...who, attempt: c.attempt, seq: c.seq, log: c.data.toString('utf8') });
          const last = chunks.at(-1);
          if (!last || chunks.length < CHUNK_PAGE) break;
          position = { attempt: last.attempt, seq: last.seq };
        }
        yield line({ type: 'end', ...who, status: b.status, log_bytes: Number(b.log_bytes) });
      }
      if (builds.length < BUILD_PAGE) return;
      after = builds.at(-1)!.drv_path;
    }
  }

  /** Whether nothing more will be written to the build's log. */
  async function state(derivationBuildId: string, evaluationId: string): Promise<{ attempt: number; over: boolean }> {
    const [row] = await sql<{ attempts: number; status: string; phase: string }[]>`
      select greatest(db.attempts, (select max(attempt) from build_log_chunks where derivation_build_id = db.id)) as attempts, db.status, e.phase
      from derivation_builds db, evaluations e where db.id = ${derivationBuildId} and e.id = ${evaluationId}`;
    if (!row) return { attempt: 0, over: true };
    // A build that never started for an evaluation that ended (aborted, failed) waits for nothing.
    const abandoned = row.status === 'queued' && (row.phase === 'aborted' || row.phase === 'failed');
    return { attempt: row.attempts, over: FINAL.has(row.status) || abandoned };
  }

  async function* liveLog(derivationBuildId: string, evaluationId: string): AsyncGenerator<Uint8Array> {
    let attempt = 0;
    let nextSeq = 0;
    let storedOffset = 0; // bytes of the attempt covered by the chunks read so far
    let sent = 0; // bytes of the attempt written to the client
    for (;;) {
      const wait = feed.next(derivationBuildId);
      try {
        // The status first: a final build has stored every chunk (the scheduler finishes the log before the status).
        const now = await state(derivationBuildId, evaluationId);
        if (now.attempt !== attempt) {
          if (attempt !== 0) yield Buffer.from(`\n--- kiln: attempt ${now.attempt} ---\n`);
          attempt = now.attempt;
          nextSeq = 0;
          storedOffset = 0;
          sent = 0;
        }
        if (attempt > 0) {
          for (;;) {
            const chunks = await sql<{ seq: number; data: Buffer }[]>`
              select seq, data from build_log_chunks where derivation_build_id = ${derivationBuildId} and attempt = ${attempt} and seq >= ${nextSeq}
              order by seq limit ${CHUNK_PAGE}`;
            for (const c of chunks) {
              const end = storedOffset + c.data.length;
              if (end > sent) yield c.data.subarray(Math.max(0, sent - storedOffset));
              sent = Math.max(sent, end);
              storedOffset = end;
              nextSeq = c.seq + 1;
            }
            if (chunks.length < CHUNK_PAGE) break;
          }
          const tail = logs?.tail(derivationBuildId, attempt, sent);
          if (tail && tail.offset <= sent && tail.offset + tail.data.length > sent) {
            yield tail.data.subarray(sent - tail.offset);
            sent = tail.offset + tail.data.length;
          }
        }
        if (now.over || feed.isClosed) return;
        await wait.settled;
      } finally {
        wait.cancel();
      }
    }
  }

  return {
    /** POST /evals/{id}/builds: authorised like GET /evals/{id}. */
    async evaluation(who: Principal, evaluationId: string): Promise<AsyncIterable<Uint8Array>> {
      await evaluations.visible(who, evaluationId, 'viewProject');
      return evaluationLogs(evaluationId);
    },

    /** POST /builds/{id}/log: authorised like GET /builds/{id}. */
    async live(who: Principal, buildId: string): Promise<AsyncIterable<Uint8Array>> {
      const build = await views.build(who, buildId);
      return liveLog(build.derivation_build, build.evaluation_id);
    },
  };
}
export type BuildLogStreams = ReturnType<typeof buildLogStreams>;
