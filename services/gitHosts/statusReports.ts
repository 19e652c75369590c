// The reporter of evaluations to the commits they were started for (docs/git-hosts.md, "Status
// reports"): a check run per evaluation (a commit status where the host has no check runs),
// queued → in progress (with build counts) → success, failure or cancelled, linking to the
// evaluation page under frontend.url.
// Durable: the report row is written with the evaluation, and a pass sends whatever an open row
// owes (its evaluation's phase differs from the one last reported), so a restart or a failed call
// loses nothing. Build progress travels on the bus as a hint. A failed call is tried again with
// backoff; a host saying it is rate limited (429, or 403 with x-ratelimit-remaining: 0) is left
// alone until the time it names. Rows are claimed with `for update skip locked`, so two server
// processes never send the same report at once.
import type { Logger } from 'pino';
import type { Sql } from 'postgres';
import type { EventBus, OutboundClient } from '../../storage/index.js';
import { CoalescingLoop, type Clock, type Supervisor } from '../../supervisors/index.js';
import { HostApiError, type HostApi } from './hostApi.js';
import { reportContent, statusDescription, type ReportContent } from './reportContent.js';
import { evaluationSnapshot } from './evaluationSnapshot.js';

export interface ReporterDeps {
  sql: Sql;
  bus: EventBus;
  api: HostApi;
  /** the outbound client the API calls go through; the reporter closes it when it stops */
  outbound: Pick<OutboundClient, 'close'>;
  /** frontend.url: where details_url and target_url point */
  frontendUrl: string;
  log: Logger;
  clock: Clock;
  supervisor: Supervisor;
  /** the first retry's delay; each next one doubles, up to 30 minutes (default 2 s) */
  retryBaseMs?: number;
}

interface ReportRow {
  evaluation_id: string;
  installation_id: string;
  repository: string;
  head_sha: string;
  name: string;
  kind: 'check_run' | 'status';
  check_run_id: string | null;
  reported_phase: string | null;
  reported_progress: string | null;
  attempts: number;
}

/** Rows one pass takes on. */
const PASS_ROWS = 50;
const MAX_RETRY_MS = 30 * 60_000;
/** How soon a report already due when the pass ended is tried again. */
const DUE_RETRY_MS = 1000;
/** After this many failed calls in a row a report is given up (logged; last_error says why). */
const MAX_ATTEMPTS = 25;

export class GitHostReporter {
  private readonly loop: CoalescingLoop;
  /** evaluations whose build counts moved since their last report (a hint from the bus) */
  private readonly progressed = new Set<string>();
  /**
   * Installations a host asked to leave alone, until when (epoch ms), by pauseKey. Per installation,
   * not per host: the host's rate limits are per installation, and one tenant's flood of reports
   * (many projects naming one busy repository) must not silence every other installation's.
   */
  private readonly pausedUntil = new Map<string, number>();
  private timer: NodeJS.Timeout | null = null;
  private unsubscribe: (() => void) | null = null;

  constructor(private readonly deps: ReporterDeps) {
    this.loop = new CoalescingLoop(() => this.pass(), (error) => deps.log.error({ err: error }, 'a status report pass failed'));
    deps.supervisor.watch({ id: 'git-host-reporter', kind: 'git-host-reporter', inspect: () => this.loop.inspect() });
  }

  start(): void {
    this.unsubscribe = this.deps.bus.subscribe((event) => {
      const id = event.scope.evaluationId;
      if (id === undefined) return;
      if (event.event.startsWith('evaluation.') || event.event.startsWith('build.')) {
        if (event.event === 'evaluation.progress' || event.event.startsWith('build.')) this.progressed.add(id);
        this.loop.wake();
      }
    });
    this.loop.wake();
  }

  /** A report was written (a webhook started evaluations): send what it owes now. */
  wake(): void {
    this.loop.wake();
  }

  async stop(): Promise<void> {
    this.unsubscribe?.();
    if (this.timer) clearTimeout(this.timer);
    await this.loop.stop();
    this.deps.outbound.close();
  }

  private async pass(): Promise<void> {
    const { sql, clock } = this.deps;
    const now = clock.now();
    const progressed = [...this.progressed];
    this.progressed.clear();
    const owed = await sql<{ evaluation_id: string }[]>`
      select r.evaluation_id from git_host_reports r join evaluations e on e.id = r.evaluation_id
      where (r.reported_phase is null or r.reported_phase not in ('completed', 'failed', 'aborted'))
        and (r.reported_phase is distinct from e.phase or r.evaluation_id = any(${progressed}::uuid[]))
        and r.next_attempt_at <= ${now}
      order by r.next_attempt_at limit ${PASS_ROWS}`;
    for (const { evaluation_id } of owed) await this.reportOne(evaluation_id);
    if (owed.length === PASS_ROWS) this.loop.wake();
    await this.scheduleNext();
  }

  /**
   * A timer for the earliest retry still owed. One already due counts too: under load the pass can
   * end after the retry time it set itself, and a timer only for later ones then left that report
   * waiting for an unrelated wake (gitHostHooks.test, clean-clone CI); a due one is tried again
   * after DUE_RETRY_MS, not at once, as one another process holds (skip locked) stays due meanwhile.
   */
  private async scheduleNext(): Promise<void> {
    const [next] = await this.deps.sql<{ at: Date }[]>`
      select min(r.next_attempt_at) as at from git_host_reports r join evaluations e on e.id = r.evaluation_id
      where (r.reported_phase is null or r.reported_phase not in ('completed', 'failed', 'aborted'))
        and r.reported_phase is distinct from e.phase`;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (!next?.at) return;
    const left = next.at.getTime() - this.deps.clock.now().getTime();
    const delay = left > 0 ? left : DUE_RETRY_MS;
    this.timer = setTimeout(() => this.loop.wake(), Math.min(delay, MAX_RETRY_MS) + 10);
    this.timer.unref();
  }

  private async reportOne(evaluationId: string): Promise<void> {
    const { sql, clock } = this.deps;
    await sql.begin(async (tx) => {
      const [row] = await tx<ReportRow[]>`
        select evaluation_id, installation_id::text, repository, head_sha, name, kind, check_run_id::text, reported_phase, reported_progress, attempts
        from git_host_reports where evaluation_id = ${evaluationId} for update skip locked`;
      if (!row) return; // another process is reporting it
      const paused = this.pausedUntil.get(pauseKey(row)) ?? 0;
      if (paused > clock.now().getTime()) {
        await tx`update git_host_reports set next_attempt_at = ${new Date(paused)} where evaluation_id = ${evaluationId}`;
        return;
      }
      const snapshot = await evaluationSnapshot(tx, evaluationId);
      if (!snapshot) return;
      const content = reportContent(snapshot, this.deps.frontendUrl);
      if (row.reported_phase === snapshot.phase && row.reported_progress === content.progressKey) return;
      try {
        const sent = await this.send(row, content);
        await tx`
          update git_host_reports set reported_phase = ${snapshot.phase}, reported_progress = ${content.progressKey}, kind = ${sent.kind},
            check_run_id = ${sent.checkRunId}, attempts = 0, last_error = null
          where evaluation_id = ${evaluationId}`;
      } catch (error) {
        const attempts = row.attempts + 1;
        const message = error instanceof Error ? error.message : String(error);
        const retryAt = new Date(clock.now().getTime() + this.retryDelay(pauseKey(row), attempts, error));
        const givenUp = attempts >= MAX_ATTEMPTS;
        this.deps.log.warn({ evaluation: evaluationId, repository: row.repository, attempts, givenUp, err: message }, 'a status report failed');
        await tx`
          update git_host_reports set attempts = ${attempts}, last_error = ${message.slice(0, 2000)}, next_attempt_at = ${retryAt}
            ${givenUp ? tx`, reported_phase = ${snapshot.phase}, reported_progress = ${content.progressKey}` : tx``}
          where evaluation_id = ${evaluationId}`;
      }
    });
  }

  /** How long until the next try: what a rate-limited host asks for, else doubling backoff. */
  private retryDelay(key: string, attempts: number, error: unknown): number {
    const base = this.deps.retryBaseMs ?? 2000;
    const backoff = Math.min(MAX_RETRY_MS, base * 2 ** Math.min(attempts - 1, 20));
    if (!(error instanceof HostApiError)) return backoff;
    const header = (name: string) => {
      const value = error.headers[name];
      return value === undefined ? null : Number(value);
    };
    const nowMs = this.deps.clock.now().getTime();
    let until: number | null = null;
    const retryAfter = header('retry-after');
    if ((error.status === 429 || error.status === 403) && retryAfter !== null && Number.isFinite(retryAfter)) until = nowMs + retryAfter * 1000;
    const reset = header('x-ratelimit-reset');
    if (until === null && header('x-ratelimit-remaining') === 0 && reset !== null && Number.isFinite(reset)) until = reset * 1000;
    if (until === null) return backoff;
    // the installation is rate limited, not this report only
    const wait = Math.min(MAX_RETRY_MS, Math.max(0, until - nowMs));
    this.pausedUntil.set(key, nowMs + wait);
    return wait;
  }

  private async send(row: ReportRow, content: ReportContent): Promise<{ kind: 'check_run' | 'status'; checkRunId: string | null }> {
    const { api } = this.deps;
    const [owner, repo] = row.repository.split('/') as [string, string];
    const installation = Number(row.installation_id);
    if (row.kind === 'check_run') {
      const body = {
        owner, repo, name: row.name, status: content.status, details_url: content.detailsUrl, external_id: row.evaluation_id,
        output: { title: content.title, summary: content.summary },
        ...(content.conclusion !== null ? { conclusion: content.conclusion, completed_at: this.deps.clock.now().toISOString() } : {}),
      };
      if (row.check_run_id === null) {
        try {
          const made = await api.call(installation, 'POST /repos/{owner}/{repo}/check-runs', { ...body, head_sha: row.head_sha });
          const id = (made.data as { id?: unknown }).id;
          if (typeof id !== 'number') throw new HostApiError('POST check-runs: the answer has no check run id', made.status, made.headers);
          return { kind: 'check_run', checkRunId: String(id) };
        } catch (error) {
          // a host without check runs (Gitea, Forgejo): commit statuses instead, from now on
          if (!(error instanceof HostApiError && error.status === 404)) throw error;
        }
      } else {
        await api.call(installation, 'PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}', { ...body, check_run_id: Number(row.check_run_id) });
        return { kind: 'check_run', checkRunId: row.check_run_id };
      }
    }
    await api.call(installation, 'POST /repos/{owner}/{repo}/statuses/{sha}', {
      owner, repo, sha: row.head_sha, state: content.state, target_url: content.detailsUrl, description: statusDescription(content), context: row.name,
    });
    return { kind: 'status', checkRunId: null };
  }
}

/** What a rate limit pauses: one installation (of the one configured host). */
const pauseKey = (row: Pick<ReportRow, 'installation_id'>): string => row.installation_id;
