// Cluster jobs (docs/builds.md, "Cluster jobs"): a build whose requiredSystemFeatures name a
// cluster size (`cluster-N`, 2 ≤ N ≤ 64) needs N workers at once, all in one zone (worker.zone; a
// `zone-<label>` feature asks for that zone). It is placed on N idle workers of one zone; after
// scheduler.clusterReserveAfterSecs without them it reserves N (they take no new single jobs) until
// they are idle or clusterReserveTimeoutSecs pass. Every member gets the buildJob with the roster
// and its rank, and must accept within clusterPrepareTimeoutSecs, or the attempt aborts and the
// build returns to the queue. Ranks ≥ 1 get theirs first and hold a slot; once they all accepted,
// the build starts on rank 0 (the guarded queued → started update), which builds it. A cancelJob
// ends the members' holds when the build ends. The rows (clusterJobRows.ts) guard against a second
// process placing the same job.
import { randomUUID } from 'node:crypto';
import type { Sql } from 'postgres';
import type { Logger } from 'pino';
import { askedZone, clusterSize, type BuildJob, type ClusterRoster, type Message, type Outgoing } from '../../protocol/index.js';
import type { Clock } from '../../supervisors/index.js';
import type { ProjectCache } from '../caches/index.js';
import type { ConnectedWorker } from '../workers/index.js';
import { endStaleClusterJobs, insertClusterJob, moveClusterJob, type ClusterJobState } from './clusterJobRows.js';
import type { BuildJobEntry, JobTable } from './schedulerJobs.js';
import type { ReadyBuild } from './schedulerQueries.js';

/** How often the rows of attempts whose process is gone are ended. */
const STALE_SWEEP_MS = 60_000;

export interface ClusterSettings {
  clusterPrepareTimeoutSecs: number;
  clusterReserveAfterSecs: number;
  clusterReserveTimeoutSecs: number;
}

export interface ClusterPlacementDeps {
  sql: Sql;
  jobs: JobTable;
  clock: Clock;
  log: Logger;
  settings: ClusterSettings;
  /** is the worker connected to this process (a member that is not is lost) */
  connected(worker: ConnectedWorker): boolean;
  /** the caches of the project the attempt builds for (null: it has none to push to) */
  caches(projectId: string): Promise<ProjectCache[] | null>;
  /** starts the build on rank 0 (queued → started, guarded) and sends its buildJob: the job id, or null when the build was no longer queued */
  startBuild(worker: ConnectedWorker, build: ReadyBuild, caches: ProjectCache[], cluster: NonNullable<BuildJob['cluster']>, members: readonly ConnectedWorker[]): Promise<string | null>;
  /** the buildJob of a member of rank ≥ 1 (as rank 0's, under its own job id) */
  memberJob(jobId: string, build: ReadyBuild, caches: ProjectCache[]): Outgoing<'buildJob'>;
  /** rank 0's job was ended here (the attempt aborted): its build back to the queue */
  requeue(job: BuildJobEntry): Promise<void>;
  /** a pass soon: every member of rank ≥ 1 accepted, rank 0 may start */
  wake(): void;
  /** fits the worker the build, cluster features aside (architecture, other features, project) */
  fits(worker: ConnectedWorker, build: ReadyBuild): boolean;
  /** does the worker build for the project */
  serves(worker: ConnectedWorker, projectId: string): boolean;
}

/**
 * The members and the one project they all build for: every member's buildJob carries that
 * project's caches (a read token for its private ones), so a worker serving only another project
 * of the build (another organization's, when projects share a derivation) is never a member.
 */
type Placement = { zone: string | null; members: ConnectedWorker[]; project: string };
interface Cluster extends Placement {
  id: string;
  build: ReadyBuild;
  state: 'reserved' | 'preparing' | 'running';
  /** ms: the reservation's expiry or the preparation's deadline */
  deadline: number;
  /** job ids in rank order (empty while reserved); rank 0's is the build's job, '' until it starts */
  jobIds: string[];
  /** the caches of rank 0's project, for every member's buildJob */
  caches: ProjectCache[];
  accepted: Set<string>;
  /** why a member of rank ≥ 1 dropped out (refused or failed), if one did */
  dropped: string | null;
}

export class ClusterPlacement {
  private readonly byBuild = new Map<string, Cluster>();
  private readonly byJob = new Map<string, Cluster>();
  private readonly heldBy = new Map<string, Cluster>();
  /** when this process first saw each cluster build ready without a placement (ms) */
  private readonly waitingSince = new Map<string, number>();
  private lastStaleSweep = -Infinity;

  constructor(private readonly deps: ClusterPlacementDeps) {}

  /** Attempts this process holds (reserved, preparing or running): passes settle them even without ready cluster builds. */
  get active(): boolean {
    return this.byBuild.size > 0;
  }

  /** Held by a cluster job (reserved, preparing or running): the worker takes no single job. */
  holds(worker: ConnectedWorker): boolean {
    return this.heldBy.has(worker.hello.workerId);
  }

  /** A pass: ends what timed out, ended or lost a member, then places or reserves the ready cluster builds. */
  async place(builds: readonly ReadyBuild[], workers: readonly ConnectedWorker[]): Promise<void> {
    const now = this.deps.clock.now().getTime();
    const ready = new Set(builds.map((b) => b.id));
    for (const cluster of [...this.byBuild.values()]) await this.settle(cluster, now, ready);
    if (now - this.lastStaleSweep >= STALE_SWEEP_MS) {
      this.lastStaleSweep = now;
      await endStaleClusterJobs(this.deps.sql, new Date(now));
    }
    for (const id of this.waitingSince.keys()) if (!ready.has(id)) this.waitingSince.delete(id);
    for (const build of builds) {
      const size = clusterSize(build.required_features);
      if (size === null) continue;
      const reserved = this.byBuild.get(build.id);
      if (reserved && reserved.state !== 'reserved') continue;
      if (reserved) {
        if (reserved.members.every((m) => m.running.jobs === 0)) await this.begin(build, reserved, now);
        continue;
      }
      const fitting = workers.filter((w) => !this.heldBy.has(w.hello.workerId) && this.deps.fits(w, build));
      const idle = chooseServing(fitting.filter((w) => w.running.jobs === 0), build, size, this.deps.serves);
      if (idle) {
        await this.begin(build, idle, now);
        continue;
      }
      const since = this.waitingSince.get(build.id) ?? now;
      this.waitingSince.set(build.id, since);
      if (now - since < this.deps.settings.clusterReserveAfterSecs * 1000) continue;
      const soonest = chooseServing([...fitting].sort((a, b) => a.running.jobs - b.running.jobs), build, size, this.deps.serves);
      if (soonest) await this.reserve(build, soonest, now);
    }
  }

  /**
   * A member's answer to its job: consumed (true) for members of rank ≥ 1, whose jobs are the
   * cluster's own; rank 0's acceptance is noted and its messages go on to the job table (false).
   */
  received(worker: ConnectedWorker, message: Message): boolean {
    if (!('jobId' in message) || message.jobId === undefined) return false;
    const cluster = this.byJob.get(message.jobId);
    if (!cluster) return false;
    const rank = cluster.jobIds.indexOf(message.jobId);
    if (cluster.members[rank]?.hello.workerId !== worker.hello.workerId) return rank !== 0;
    if (message.t === 'jobAccepted') {
      cluster.accepted.add(message.jobId);
      if (cluster.state === 'preparing' && cluster.accepted.size === cluster.members.length) void this.running(cluster);
      else if (rank > 0 && cluster.accepted.size === cluster.members.length - 1) this.deps.wake();
    } else if (rank > 0 && (message.t === 'jobRefused' || message.t === 'jobFailed')) {
      cluster.dropped ??= `member ${rank} (worker ${worker.hello.workerId}) ${message.t === 'jobRefused' ? 'refused' : 'failed'} its job`;
    }
    return rank !== 0;
  }

  private async reserve(build: ReadyBuild, placement: Placement, now: number): Promise<void> {
    const id = randomUUID();
    const deadline = now + this.deps.settings.clusterReserveTimeoutSecs * 1000;
    const row = { id, derivationBuildId: build.id, state: 'reserved' as const, zone: placement.zone, members: placement.members.map((m) => m.hello.workerId), deadline: new Date(deadline) };
    if (!(await insertClusterJob(this.deps.sql, row, new Date(now)))) return;
    this.remember({ ...placement, id, build, state: 'reserved', deadline, jobIds: [], caches: [], accepted: new Set(), dropped: null });
    this.deps.log.info({ build: build.id, cluster: id, zone: placement.zone, members: row.members }, 'reserved workers for a cluster job');
  }

  /** Sends the job to the members of rank ≥ 1; rank 0 gets it once they all accepted (settle). */
  private async begin(build: ReadyBuild, placement: Placement | Cluster, now: number): Promise<void> {
    const { sql, settings } = this.deps;
    const deadline = now + settings.clusterPrepareTimeoutSecs * 1000;
    const reserved = 'id' in placement ? placement : null;
    const id = reserved?.id ?? randomUUID();
    const members = placement.members;
    const caches = await this.deps.caches(placement.project);
    if (caches === null) return;
    const claimed = reserved
      ? await moveClusterJob(sql, id, ['reserved'], 'preparing', { now: new Date(now), deadline: new Date(deadline) })
      : await insertClusterJob(sql, { id, derivationBuildId: build.id, state: 'preparing', zone: placement.zone, members: members.map((m) => m.hello.workerId), deadline: new Date(deadline) }, new Date(now));
    if (!claimed) {
      if (reserved) this.forget(reserved);
      return;
    }
    const cluster: Cluster = reserved ?? { ...placement, id, build, state: 'preparing', deadline, jobIds: [], caches, accepted: new Set(), dropped: null };
    Object.assign(cluster, { state: 'preparing', deadline, build, caches, jobIds: ['', ...members.slice(1).map((_, i) => `cluster:${id}:${i + 1}`)] });
    this.remember(cluster);
    for (const jobId of cluster.jobIds.slice(1)) this.byJob.set(jobId, cluster);
    members.forEach((member, rank) => {
      if (rank > 0) member.link.send({ ...this.deps.memberJob(cluster.jobIds[rank]!, build, caches), cluster: { id, rank, roster: rosterOf(cluster) } });
    });
    this.waitingSince.delete(build.id);
    this.deps.log.info({ build: build.id, cluster: id, zone: placement.zone, members: rosterOf(cluster) }, 'sent a cluster job to its members');
  }

  /** Every member of rank ≥ 1 accepted: the build starts on rank 0 (false: it was no longer queued). */
  private async startBuild(cluster: Cluster): Promise<boolean> {
    const jobId = await this.deps.startBuild(cluster.members[0]!, cluster.build, cluster.caches, { id: cluster.id, rank: 0, roster: rosterOf(cluster) }, cluster.members);
    if (jobId === null) return false;
    cluster.jobIds[0] = jobId;
    this.byJob.set(jobId, cluster);
    return true;
  }

  private async running(cluster: Cluster): Promise<void> {
    cluster.state = 'running';
    await moveClusterJob(this.deps.sql, cluster.id, ['preparing'], 'running', { now: this.deps.clock.now() })
      .catch((error: unknown) => this.deps.log.warn({ err: error, cluster: cluster.id }, 'recording a running cluster job failed'));
  }

  /** What became of the attempt since the last pass (`ready`: the builds this pass found ready). */
  private async settle(cluster: Cluster, now: number, ready: ReadonlySet<string>): Promise<void> {
    const gone = cluster.members.find((m) => !this.deps.connected(m));
    if (cluster.state === 'reserved') {
      if (gone) await this.end(cluster, 'expired', `member ${gone.hello.workerId} disconnected`);
      else if (now >= cluster.deadline) await this.end(cluster, 'expired', 'the reservation expired (scheduler.clusterReserveTimeoutSecs)');
      // not in this pass's ready builds (the queue may hold only part of them): asked, so an aborted build frees its workers at once
      else if (!ready.has(cluster.build.id) && !(await stillQueued(this.deps.sql, cluster.build.id))) {
        await this.end(cluster, 'expired', 'the build is no longer queued (aborted, or started elsewhere)');
        return;
      }
      // the wait starts over: the released workers take single jobs before the build reserves again
      if (gone || now >= cluster.deadline) this.waitingSince.set(cluster.build.id, now);
      return;
    }
    const started = cluster.jobIds[0] !== '';
    const buildJob = started ? this.deps.jobs.get(cluster.jobIds[0]!) : undefined;
    // rank 0's job ended: a result, a failure, a refusal or a loss the job table handled (the build is done or re-queued)
    if (started && buildJob === undefined) {
      await this.end(cluster, cluster.state === 'running' ? 'finished' : 'aborted', cluster.state === 'running' ? null : 'member 0 did not take the build');
      return;
    }
    const why = gone ? `member ${gone.hello.workerId} disconnected`
      : cluster.dropped
        ?? (cluster.state === 'preparing' && now >= cluster.deadline ? `member(s) ${silent(cluster).join(', ')} did not accept within scheduler.clusterPrepareTimeoutSecs` : null);
    if (why !== null) {
      // the build is still queued unless rank 0 got it: then its job ends here and the build goes back
      if (buildJob?.kind === 'build' && this.deps.jobs.end(buildJob, { type: 'cancelled' })) {
        cluster.members[0]!.link.send({ t: 'cancelJob', jobId: buildJob.jobId, reason: `the cluster job aborted: ${why}` });
        await this.deps.requeue(buildJob);
      }
      await this.end(cluster, 'aborted', why);
      return;
    }
    if (!started && cluster.accepted.size === cluster.members.length - 1 && !(await this.startBuild(cluster))) {
      await this.end(cluster, 'aborted', 'the build was no longer queued (another process started it, or it was aborted)');
    }
  }

  /** Ends the attempt: members of rank ≥ 1 get a cancelJob, the workers are free, the row says why. */
  private async end(cluster: Cluster, state: Extract<ClusterJobState, 'finished' | 'aborted' | 'expired'>, reason: string | null): Promise<void> {
    this.forget(cluster);
    cluster.members.forEach((member, rank) => {
      const jobId = cluster.jobIds[rank];
      if (rank > 0 && jobId !== undefined && this.deps.connected(member)) member.link.send({ t: 'cancelJob', jobId, reason: reason ?? 'the cluster job ended' });
    });
    await moveClusterJob(this.deps.sql, cluster.id, ['reserved', 'preparing', 'running'], state, { now: this.deps.clock.now(), ...(reason === null ? {} : { reason }) });
    if (reason !== null) this.deps.log.info({ build: cluster.build.id, cluster: cluster.id, state }, `cluster job ${state}: ${reason}`);
  }

  private remember(cluster: Cluster): void {
    this.byBuild.set(cluster.build.id, cluster);
    for (const member of cluster.members) this.heldBy.set(member.hello.workerId, cluster);
  }

  private forget(cluster: Cluster): void {
    if (this.byBuild.get(cluster.build.id) === cluster) this.byBuild.delete(cluster.build.id);
    for (const jobId of cluster.jobIds) this.byJob.delete(jobId);
    for (const member of cluster.members) if (this.heldBy.get(member.hello.workerId) === cluster) this.heldBy.delete(member.hello.workerId);
  }
}

/** For the first of the build's projects that has them: `size` workers of one zone (choose) that all build for it. */
export function chooseServing(workers: readonly ConnectedWorker[], build: Pick<ReadyBuild, 'projects' | 'required_features'>, size: number,
  serves: (worker: ConnectedWorker, projectId: string) => boolean): Placement | null {
  const zone = askedZone(build.required_features);
  for (const project of build.projects) {
    const found = choose(workers.filter((w) => serves(w, project)), size, zone);
    if (found) return { ...found, project };
  }
  return null;
}

/** The first `size` workers of the zone with the most of them (in the order given), if one has enough. */
function choose(workers: readonly ConnectedWorker[], size: number, zone: string | undefined): Omit<Placement, 'project'> | null {
  const zones = new Map<string | null, ConnectedWorker[]>();
  for (const worker of workers) {
    if (zone !== undefined && worker.hello.zone !== zone) continue;
    const members = zones.get(worker.hello.zone);
    if (members) members.push(worker);
    else zones.set(worker.hello.zone, [worker]);
  }
  let best: Omit<Placement, 'project'> | null = null;
  for (const [label, members] of zones) {
    if (members.length >= size && (best === null || members.length > best.members.length)) best = { zone: label, members };
  }
  return best && { zone: best.zone, members: best.members.slice(0, size) };
}

async function stillQueued(sql: Sql, derivationBuildId: string): Promise<boolean> {
  const [row] = await sql<{ status: string }[]>`select status from derivation_builds where id = ${derivationBuildId}`;
  return row?.status === 'queued';
}

const rosterOf = (cluster: Placement): ClusterRoster => cluster.members.map((m) => ({ workerId: m.hello.workerId, endpoint: m.hello.endpoint ?? null }));

/** The ranks sent a job that have not accepted it. */
const silent = (cluster: Cluster): number[] => cluster.jobIds.flatMap((jobId, rank) => (jobId !== '' && !cluster.accepted.has(jobId) ? [rank] : []));
