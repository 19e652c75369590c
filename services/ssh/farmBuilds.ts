// Builds asked for over SSH (BuildPaths of `drv!out`, BuildDerivation) go into kiln's build farm:
// each becomes a direct build (services/builds/directBuilds.ts, as `POST /builds`) of the .drv in
// the session's cache, in the one project the login may build in that writes into that cache. The
// .drv's closure is read from the cache (the client copied it there), so the scheduler, the
// workers, the events and the direct-builds list treat it like any direct build; the session
// follows the live logs of the inputs the farm builds first, then the root build's, and hands
// their lines to the client until the root build is final.
//
// Why the .drv must be in the cache: a BuildDerivation carries only a "basic" derivation (no
// input derivations), whose output paths nobody can check. Nix's own daemon builds those only
// for trusted users; kiln builds the checked .drv, whose outputs Nix verifies on every worker.
import type { Sql } from 'postgres';
import { ApiError, DEFAULT_STORE_DIR, EXPORT_MAGIC, parseStorePath, STORE_PATH_NAME_MAX, WireError, wireString, wireStrings, wireU64, type WireReader } from '../../protocol/index.js';
import type { Principal } from '../access/index.js';
import { demandProjectPath } from '../projects/index.js';
import type { BuildView } from '../builds/index.js';
import type { CachePaths, SessionStore } from './cachePaths.js';
import { StoreRefusal } from './sessionErrors.js';

/** The most bytes of a .drv closure read from the cache for one build: the cap of `POST /builds`. */
const MAX_DRV_CLOSURE_BYTES = 20 << 20;
const FINAL = new Set(['completed', 'failed', 'substituted', 'aborted']);
/** Most bytes of a BasicDerivation's environment kiln reads (and drops). */
const MAX_ENV_BYTES = 32 << 20;
/**
 * Longest output path kiln keeps from a BasicDerivation (PATH_MAX). The outputs are held for the
 * whole build: at the wire's own string cap, 1000 outputs' names and paths would be 2 GB.
 */
const MAX_OUTPUT_PATH_BYTES = 4096;

export interface FarmBuildsDeps {
  sql: Sql;
  direct: { submit(who: Principal, request: { project: string; cache: string | null; drv: string | null; closure: Buffer }): Promise<BuildView> };
  views: {
    build(who: Principal, buildId: string): Promise<BuildView>;
    /** the builds of the same evaluation whose outputs this one takes as inputs */
    dependencies(who: Principal, buildId: string): Promise<BuildView[]>;
  };
  /** the root build's log as it is written, ending when the build is final */
  liveLog(who: Principal, buildId: string): Promise<AsyncIterable<Uint8Array>>;
}

/** How a farm build ended, as the client is told. */
interface FarmOutcome {
  ok: boolean;
  /** the failure as the client shows it; empty when ok */
  message: string;
  /** output name → store path */
  outputs: Record<string, string>;
}

/** The projects the login may build in that write into the cache (subscription mode 0 or 2). */
async function buildingProjects(deps: FarmBuildsDeps, who: Principal, cacheId: string): Promise<string[]> {
  const rows = await deps.sql<{ path: string }[]>`
    select o.name || '/' || p.name as path from subscriptions s join projects p on p.id = s.project_id
    join organizations o on o.id = p.organization_id
    where s.cache_id = ${cacheId} and s.mode in (0, 2) order by 1`;
  const allowed: string[] = [];
  for (const { path } of rows) {
    try {
      await demandProjectPath(deps.sql, who, path, 'triggerEvaluation');
      allowed.push(path);
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
    }
  }
  return allowed;
}

/** `nix-store --export` of the .drv's closure as the cache holds it; a refusal when a path is missing. */
async function drvClosureExport(cache: CachePaths, cacheName: string, drvPath: string): Promise<Buffer> {
  const order: string[] = [];
  const seen = new Set<string>();
  const queue = [drvPath];
  const parts: Buffer[] = [];
  let bytes = 0;
  while (queue.length > 0) {
    const path = queue.pop()!;
    if (seen.has(path)) continue;
    seen.add(path);
    const info = await cache.info(path);
    if (info === null) {
      throw new StoreRefusal(path === drvPath
        ? `kiln builds a derivation from its .drv in the cache, and cache "${cacheName}" does not hold ${drvPath}: copy it first (nix copy --derivation --to ssh-ng://${cacheName}@HOST ${drvPath}), or build with nix build --store ssh-ng://${cacheName}@HOST --eval-store auto`
        : `${drvPath} needs ${path}, which cache "${cacheName}" does not hold: copy the .drv's closure (nix copy --derivation)`);
    }
    bytes += info.narSize;
    if (bytes > MAX_DRV_CLOSURE_BYTES) throw new StoreRefusal(`the closure of ${drvPath} has more than ${MAX_DRV_CLOSURE_BYTES} bytes, the most kiln reads for one build`);
    order.push(path);
    const references = info.references.map((r) => `${DEFAULT_STORE_DIR}/${r}`).sort();
    const nar: Buffer[] = [];
    for await (const chunk of await cache.nar(path)) nar.push(Buffer.from(chunk));
    parts.push(wireU64(1), ...nar, wireU64(EXPORT_MAGIC), wireString(path), wireStrings(references),
      wireString(info.deriver ? `${DEFAULT_STORE_DIR}/${info.deriver}` : ''), wireU64(0));
    for (const r of references) if (!seen.has(r)) queue.push(r);
  }
  parts.push(wireU64(0));
  return Buffer.concat(parts);
}

/**
 * A BasicDerivation as writeDerivation sends it (derivations.cc): outputs (name, path, hash
 * algorithm, hash), input sources, platform, builder, arguments, environment. Only the outputs'
 * paths are kept: kiln builds the .drv from the cache, never this unverifiable copy.
 */
export async function readBasicDerivationOutputs(from: WireReader): Promise<Record<string, string>> {
  const outputs: Record<string, string> = {};
  const count = await from.u64();
  if (count > 1000) throw new WireError(`a derivation with ${count} outputs`);
  for (let i = 0; i < count; i++) {
    // An output's name is part of its store path's name (NAME-OUTPUT), so at most that long.
    const name = await from.string(STORE_PATH_NAME_MAX);
    outputs[name] = await from.string(MAX_OUTPUT_PATH_BYTES);
    await from.string(); // hash algorithm
    await from.string(); // hash
  }
  await from.strings(); // input sources
  await from.string(); // platform
  await from.string(); // builder
  await from.strings(); // arguments
  const env = await from.u64();
  if (env > 100_000) throw new WireError(`a derivation with ${env} environment variables`);
  let envBytes = 0;
  for (let i = 0; i < env * 2; i++) {
    envBytes += (await from.string()).length;
    if (envBytes > MAX_ENV_BYTES) throw new WireError(`a derivation's environment has more than ${MAX_ENV_BYTES} bytes`);
  }
  return outputs;
}

/** Why a finished farm build does not answer a BuildDerivation whose derivation names `claimed` outputs; empty when it does. */
export function buildDerivationFailure(outcome: FarmOutcome, claimed: Record<string, string>, drvPath: string, cacheName: string): string {
  if (!outcome.ok) return outcome.message;
  // The client takes the outputs its own derivation names: they must be what the cache's .drv built.
  const differing = Object.entries(claimed).filter(([name, path]) => path !== '' && outcome.outputs[name] !== path);
  if (differing.length === 0) return '';
  return `the derivation sent names outputs (${differing.map(([n, p]) => `${n} ${p}`).join(', ')}) that ${drvPath} in cache "${cacheName}" does not build`;
}

/** Builds whose outputs are there already (built before, or in a cache the project reads): nothing to wait for. */
const DONE = new Set(['completed', 'substituted']);

/**
 * The builds `rootId` waits for, transitively, inputs before what needs them; the root not
 * included, nor inputs done already and what is below them: a `--builders` client builds the
 * inputs first (each its own BuildDerivation), so by the time it asks for the root they are done,
 * and following their logs again would show them as built twice.
 */
async function inputBuilds(deps: FarmBuildsDeps, who: Principal, rootId: string): Promise<BuildView[]> {
  const ordered: BuildView[] = [];
  const seen = new Set<string>([rootId]);
  const visit = async (buildId: string): Promise<void> => {
    for (const input of await deps.views.dependencies(who, buildId)) {
      if (seen.has(input.build_id) || DONE.has(input.status)) continue;
      seen.add(input.build_id);
      await visit(input.build_id);
      ordered.push(input);
    }
  };
  await visit(rootId);
  return ordered;
}

/** Hands a build's live log to `log` line by line until the build is final. */
async function followLog(deps: FarmBuildsDeps, who: Principal, buildId: string, log: (line: string) => Promise<void>): Promise<void> {
  let partial = '';
  for await (const chunk of await deps.liveLog(who, buildId)) {
    const lines = (partial + Buffer.from(chunk).toString('utf8')).split('\n');
    partial = lines.pop()!;
    for (const line of lines) await log(line);
  }
  if (partial !== '') await log(partial);
}

export function farmBuilds(deps: FarmBuildsDeps) {
  return {
    /**
     * Builds `drvPath` in the farm for the session's login; `log` receives the root build's log
     * line by line. Refusals (no project, no .drv, no permission) throw StoreRefusal.
     */
    async build(store: SessionStore, cache: CachePaths, drvPath: string, log: (line: string) => Promise<void>): Promise<FarmOutcome> {
      const parsed = parseStorePath(drvPath, DEFAULT_STORE_DIR, 'drvPath');
      if (!parsed.ok || !drvPath.endsWith('.drv')) throw new StoreRefusal(`"${drvPath}" is not a derivation's store path`);
      cache.demandRead('building');
      if (store.writeTarget === null) throw new StoreRefusal(`building into cache "${store.cache.name}" needs the writeStore permission there (the outputs land in it)`);
      const projects = await buildingProjects(deps, store.who, store.cache.id);
      const project = store.project ?? (projects.length === 1 ? projects[0]! : null);
      if (project === null) {
        throw new StoreRefusal(projects.length === 0
          ? `no project you may build in (the Write role) writes into cache "${store.cache.name}": subscribe one with mode 0 or 2`
          : `several projects you may build in write into cache "${store.cache.name}" (${projects.join(', ')}): name one with remote-program='nix-daemon --project ORG/PROJECT'`);
      }
      if (!projects.some((p) => p.toLowerCase() === project.toLowerCase())) {
        throw new StoreRefusal(`project "${project}" does not write into cache "${store.cache.name}", or you may not build in it`);
      }
      const closure = await drvClosureExport(cache, store.cache.name, drvPath);
      const submitted = await deps.direct.submit(store.who, { project, cache: store.cache.name, drv: drvPath, closure });
      await log(`kiln: building ${drvPath} as build ${submitted.build_id} of project ${project}`);
      // The inputs the farm builds first (their .drv in the cache, their outputs not): their logs
      // come before the root's, each in full, one after the other (nothing is lost while another
      // is followed: a live log starts from its first stored byte).
      for (const input of await inputBuilds(deps, store.who, submitted.build_id)) {
        await log(`kiln: building input ${input.drv_path} as build ${input.build_id}`);
        await followLog(deps, store.who, input.build_id, log);
      }
      await followLog(deps, store.who, submitted.build_id, log);
      // The live log ends when the build is final, or never started and its evaluation ended.
      const final = await deps.views.build(store.who, submitted.build_id);
      const outputs = Object.fromEntries(Object.entries(final.outputs).filter((e): e is [string, string] => e[1] !== null));
      if (final.status === 'completed' || final.status === 'substituted') return { ok: true, message: '', outputs };
      const why = final.failure?.message ?? final.failure?.reason ?? (FINAL.has(final.status) ? final.status : `its evaluation ended with the build ${final.status}`);
      return { ok: false, message: `kiln build ${final.build_id} of ${drvPath} ${final.status}: ${why}`, outputs };
    },
  };
}

export type FarmBuilds = ReturnType<typeof farmBuilds>;
