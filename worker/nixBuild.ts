// Building one derivation with nix-store --realise, in three steps:
//   1. the .drv itself: here already, or copied from one of the job's substituters;
//   2. its inputs (the outputs it uses of each input derivation, its sources): present or
//      substitutable, with --max-jobs 0 so nothing is built; otherwise inputs_unavailable and
//      the server dispatches the missing dependency first (build.inputsUnavailableMaxLoops);
//   3. the build, with the job's timeouts and --cores, its log streamed line by line.
import { z } from 'zod';
import { isPlacementFeature, jobFailure, type JobFailure, type Substituter } from '../protocol/index.js';
import { classifyBuildFailure } from './failureClassifier.js';
import { allValid, nix, nixErrorText, nixStore, validOf } from './nixCli.js';
import { runCommand, type RunOptions } from './childProcess.js';
import { storeConnections } from './storeConnections.js';
import { parseNixLogLine } from './nixLogLines.js';
import { remoteBuildArgs, remoteBuilderFailure } from './remoteBuilders.js';
import { letGo, StoreTrust, type TrustScope } from './storeTrust.js';
import { removeRoots, rootPaths } from './storeRoots.js';

export interface RealiseOptions {
  drvPath: string;
  /** 0: none */
  timeoutSecs: number;
  /** 0: none */
  maxSilentSecs: number;
  cores: number | null;
  substituters: readonly Substituter[];
  /** a netrc file with the private substituters' passwords (worker/substituterNetrc.ts); null: none */
  netrcFile: string | null;
  /** where to register indirect GC roots: the outputs here, the inputs at `<gcRoot>-inputs…`; null: none */
  gcRoot: string | null;
  /** forward the stored log when the outputs were already valid */
  fetchStoredLog: boolean;
  env: NodeJS.ProcessEnv;
  signal?: AbortSignal;
  onLog: (line: string) => void;
  /** starts a stage span (build.fetch_inputs, build.build) and returns its end (docs/metrics.md, "Stage traces") */
  stage?: (name: string) => (status: 'ok' | 'error') => void;
  /** runs the build step (not the fetches before it) through this, say inside the build's cgroup (buildCgroup.ts) */
  wrap?: (command: string, args: readonly string[]) => [string, string[]];
  /** the build step's out-of-memory score adjustment, which its builders inherit (worker.build.oomScoreAdjust) */
  oomScore?: number;
  /** worker.build.builders: build on these machines only (worker/remoteBuilders.ts); null builds here */
  builders?: string | null;
  /** rank 0 of a cluster job: Nix is told this machine has the derivation's cluster features (docs/builds.md, "Cluster jobs") */
  cluster?: boolean;
  /** where rootPaths writes its scratch list (the worker's tmp/); default: the system's */
  scratchDir?: string;
  /** which valid paths this job may use as they are (worker/storeTrust.ts); default: one per process, in memory */
  trust?: StoreTrust;
}

/**
 * `declined`: the store holds paths this job may not use and cannot let go of them now (another
 * build uses them): the worker gives the job back instead of failing it (docs/builds.md, "The shared store").
 */
export type Realised = { ok: true; outputs: Record<string, string>; alreadyValid: boolean } | { ok: false; failure: JobFailure; declined?: true };

let processTrust: Promise<StoreTrust> | undefined;
const LET_GO_ROUNDS = 3;
const trustOf = (options: RealiseOptions): Promise<StoreTrust> =>
  options.trust ? Promise.resolve(options.trust) : (processTrust ??= StoreTrust.open(null, { env: options.env }));

const Shown = z.record(
  z.string(),
  z.object({
    outputs: z.record(z.string(), z.object({ path: z.string().optional(), hash: z.string().optional() })),
    inputSrcs: z.array(z.string()),
    inputDrvs: z.record(z.string(), z.array(z.string())),
    env: z.record(z.string(), z.string()).optional(),
  }),
);

/** Extra substituters and their keys, on top of whatever Nix is configured with. */
function substituterArgs(substituters: readonly Substituter[], netrcFile: string | null): string[] {
  if (substituters.length === 0) return [];
  return [
    '--option', 'extra-substituters', substituters.map((s) => s.url).join(' '),
    '--option', 'extra-trusted-public-keys', substituters.flatMap((s) => s.publicKeys).join(' '),
    // A kiln cache's "not here" changes with every push: Nix's narinfo disk cache would keep an
    // earlier miss for an hour (its default), so a worker that looked for an output before it was
    // built could not substitute it once its own store let go of it (worker.storeRootMaxMb).
    '--option', 'narinfo-cache-negative-ttl', '0',
    ...(netrcFile === null ? [] : ['--option', 'netrc-file', netrcFile]),
  ];
}

const cancelled = (): Realised => ({ ok: false, failure: jobFailure('cancelled', 'the build was cancelled') });

async function ensureDerivation(options: RealiseOptions): Promise<JobFailure | undefined> {
  const run = { env: options.env, ...(options.signal ? { signal: options.signal } : {}) };
  if (await allValid([options.drvPath], run)) return undefined;
  const reasons: string[] = [];
  for (const substituter of options.substituters) {
    // --derivation: the .drv itself; without it nix copy would realise its outputs in the substituter, which cannot build
    const copied = await nix(['copy', '--derivation', '--from', substituter.url, ...substituterArgs([substituter], options.netrcFile), options.drvPath], run);
    if (copied.exitCode === 0) return undefined;
    reasons.push(`${substituter.url}: ${nixErrorText(copied.stderr)}`);
  }
  return jobFailure('inputs_unavailable', `${options.drvPath} is not in the local store${reasons.length ? `, and no substituter had it:\n${reasons.join('\n')}` : ' and the job names no substituter'}`);
}

export async function realiseDerivation(options: RealiseOptions): Promise<Realised> {
  // Everything before the build command is fetching its inputs; a realisation that ends before it ends that stage.
  let fetching = options.stage?.('build.fetch_inputs');
  const fetched = (status: 'ok' | 'error') => {
    fetching?.(status);
    fetching = undefined;
  };
  const realised = await realiseSteps(options, fetched);
  fetched(realised.ok ? 'ok' : 'error');
  return realised;
}

async function realiseSteps(options: RealiseOptions, fetched: (status: 'ok' | 'error') => void, round = 0): Promise<Realised> {
  const run = { env: options.env, ...(options.signal ? { signal: options.signal } : {}) };
  const trust = await trustOf(options);
  const scope = { substituters: options.substituters, ...(options.signal ? { signal: options.signal } : {}) };
  const missing = await ensureDerivation(options);
  if (options.signal?.aborted) return cancelled();
  if (missing) return { ok: false, failure: missing };

  // Paths valid here that this job may not use (worker/storeTrust.ts) are let go of, then everything
  // is looked at again: Nix substitutes or builds them afresh for this job. Outputs let go of can
  // show inputs to let go of in turn; a path rejected past that came back from the job's own caches.
  const untrusted = async (rejected: string[], what: string): Promise<Realised> => {
    if (round >= LET_GO_ROUNDS) return { ok: false, failure: jobFailure('worker_error', `${what} of ${options.drvPath} substituted again are still not vouched for by this job's caches: ${rejected.join(', ')}`) };
    // every root of the job, the build's own (`<gcRoot>`, `<gcRoot>-<n>`) too: each round roots afresh what it uses
    if (options.gcRoot !== null) await removeRoots(options.gcRoot);
    const refused = await letGo(rejected, run);
    if (refused !== null) {
      const message = `the store holds ${what} of ${options.drvPath} from a source this project does not trust, in use by another build (${rejected.join(', ')}): the job goes back to the queue. ${refused}`;
      return { ok: false, failure: jobFailure('worker_error', message), declined: true };
    }
    return realiseSteps(options, fetched, round + 1);
  };

  // The derivation and its closure (input derivations, sources) are checked as inputs are: a .drv
  // is input-addressed by nothing Nix verifies, so another organization's cache could otherwise
  // install a fake one under this job's path. A real one is text-addressed and passes as such.
  // Rooted first (`<gcRoot>-drv`, with its closure), so another job letting go of paths cannot
  // swap it between the check and the build, which reads it again.
  if (options.gcRoot !== null) {
    const refused = await rootPaths([options.drvPath], options.gcRoot, run, options.scratchDir);
    if (options.signal?.aborted) return cancelled();
    if (refused !== null) return { ok: false, failure: jobFailure('worker_error', `${options.drvPath}: ${refused}`) };
  }
  const drvVerdict = await trust.check([options.drvPath], scope, run).catch((e: unknown) => (e instanceof Error ? e.message : String(e)));
  if (typeof drvVerdict === 'string') return options.signal?.aborted ? cancelled() : { ok: false, failure: jobFailure('worker_error', drvVerdict) };
  if (drvVerdict.rejected.length > 0) return untrusted(drvVerdict.rejected, 'derivations');

  const shownResult = await nix(['show-derivation', options.drvPath], run);
  if (shownResult.exitCode !== 0) return { ok: false, failure: jobFailure('worker_error', `nix show-derivation: ${nixErrorText(shownResult.stderr)}`) };
  const shown = Shown.parse(JSON.parse(shownResult.stdout))[options.drvPath];
  if (!shown) return { ok: false, failure: jobFailure('worker_error', `nix show-derivation did not describe ${options.drvPath}`) };
  const outputs: Record<string, string> = {};
  for (const [name, output] of Object.entries(shown.outputs)) {
    if (!output.path) return { ok: false, failure: jobFailure('unsupported', `output ${name} of ${options.drvPath} is content-addressed (ca-derivations), which kiln workers do not build yet`) };
    outputs[name] = output.path;
  }
  const fixedOutput = Object.values(shown.outputs).some((o) => o.hash !== undefined);

  // Outputs already valid are checked even when others are missing: Nix keeps a valid output as it
  // is and builds the rest, so another organization's `dev` would otherwise be reported as this
  // job's. They are rooted first (`<gcRoot>-outputs…`), so what the check saw is what gets pushed.
  const outputPaths = Object.values(outputs);
  const validOutputs = await validOf(outputPaths, run).catch((e: unknown) => (e instanceof Error ? e.message : String(e)));
  if (typeof validOutputs === 'string') return { ok: false, failure: jobFailure('worker_error', validOutputs) };
  if (validOutputs.length > 0) {
    if (options.gcRoot !== null) {
      const rooted = await nixStore(['--realise', '--max-jobs', '0', '--add-root', `${options.gcRoot}-outputs`, ...validOutputs], { ...run, collectStdout: false });
      if (rooted.aborted) return cancelled();
      if (rooted.exitCode !== 0) return { ok: false, failure: jobFailure('worker_error', `rooting the valid outputs of ${options.drvPath}: ${nixErrorText(rooted.stderr)}`) };
    }
    const verdict = await trust.check(validOutputs, scope, run).catch((e: unknown) => (e instanceof Error ? e.message : String(e)));
    if (typeof verdict === 'string') return options.signal?.aborted ? cancelled() : { ok: false, failure: jobFailure('worker_error', verdict) };
    if (verdict.rejected.length > 0) return untrusted(verdict.rejected, 'outputs');
  }
  if (validOutputs.length === outputPaths.length) {
    if (options.fetchStoredLog) {
      const stored = await nixStore(['--read-log', options.drvPath], run);
      if (stored.exitCode === 0) for (const line of stored.stdout.split('\n')) if (line) options.onLog(line);
    }
    return { ok: true, outputs, alreadyValid: true };
  }

  // A source that is itself a .drv (`unsafeDiscardOutputDependency`) is in the derivation's closure,
  // valid and checked already: realised, it would mean building that derivation.
  const inputs = [...Object.entries(shown.inputDrvs).flatMap(([drv, names]) => names.map((name) => `${drv}!${name}`)), ...shown.inputSrcs.filter((p) => !p.endsWith('.drv'))];
  let inputKeys = drvVerdict.keys;
  if (inputs.length > 0) {
    // The inputs' own root (`<gcRoot>-inputs`, `-inputs-2`, …) keeps them from a collection
    // between this step and the build, where no Nix process of the job holds them.
    const pin = options.gcRoot === null ? [] : ['--add-root', `${options.gcRoot}-inputs`];
    const fetched = await nixStore(['--realise', '--max-jobs', '0', ...pin, ...substituterArgs(options.substituters, options.netrcFile), ...inputs], { ...run, collectStdout: false });
    if (fetched.aborted) return cancelled();
    if (fetched.exitCode !== 0) {
      const text = nixErrorText(fetched.stderr);
      const failure = classifyBuildFailure({ exitCode: fetched.exitCode, signal: fetched.signal, errorText: text });
      // "unable to start any build": an input is neither here nor substitutable, and --max-jobs 0 forbade building it.
      return { ok: false, failure: failure.class === 'FailedTransient' ? failure : jobFailure('inputs_unavailable', text) };
    }
    // Everything the build will see is valid now, rooted: none of it changes under the check.
    const inputPaths = await inputPathsOf(shown, run);
    if (typeof inputPaths === 'string') return { ok: false, failure: jobFailure('worker_error', inputPaths) };
    const verdict = await trust.check(inputPaths, scope, run).catch((e: unknown) => (e instanceof Error ? e.message : String(e)));
    if (typeof verdict === 'string') return options.signal?.aborted ? cancelled() : { ok: false, failure: jobFailure('worker_error', verdict) };
    if (verdict.rejected.length > 0) return untrusted(verdict.rejected, 'inputs');
    inputKeys = [...new Set([...inputKeys, ...verdict.keys])].sort();
  }

  const args = ['--realise', options.drvPath, '--log-format', 'internal-json', ...remoteBuildArgs(options.builders ?? null), ...substituterArgs(options.substituters, options.netrcFile)];
  const placement = options.cluster ? (shown.env?.['requiredSystemFeatures'] ?? '').split(/\s+/).filter(isPlacementFeature) : [];
  if (placement.length > 0) args.push('--option', 'extra-system-features', placement.join(' '));
  if (options.cores !== null) args.push('--cores', String(options.cores));
  if (options.timeoutSecs > 0) args.push('--timeout', String(options.timeoutSecs));
  if (options.maxSilentSecs > 0) args.push('--max-silent-time', String(options.maxSilentSecs));
  if (options.gcRoot !== null) args.push('--add-root', options.gcRoot);
  const errors: string[] = [];
  fetched('ok');
  const building = options.stage?.('build.build');
  const [command, commandArgs] = options.wrap ? options.wrap('nix-store', args) : ['nix-store', args];
  const built = await storeConnections.hold(() => runCommand(command, commandArgs, {
    ...run,
    ...(options.oomScore === undefined ? {} : { oomScore: options.oomScore }),
    collectStdout: false,
    onStderrLine: (line) => {
      const event = parseNixLogLine(line);
      if (event.kind === 'log') options.onLog(event.text);
      else if (event.kind === 'error') errors.push(event.text);
    },
  }));
  building?.(built.exitCode === 0 ? 'ok' : 'error');
  if (built.aborted) return cancelled();
  if (built.exitCode === 0) {
    const settled = await settleOutputs(trust, outputs, validOutputs, inputKeys, scope, run, Boolean(options.builders));
    if (typeof settled === 'string') return options.signal?.aborted ? cancelled() : { ok: false, failure: jobFailure('worker_error', settled) };
    if (settled.length > 0) return untrusted(settled, 'outputs');
    return { ok: true, outputs, alreadyValid: false };
  }
  const errorText = errors.join('\n') || nixErrorText(built.stderr);
  const unreachable = options.builders ? remoteBuilderFailure(errorText) : undefined;
  if (unreachable) return { ok: false, failure: unreachable };
  return { ok: false, failure: classifyBuildFailure({ exitCode: built.exitCode, signal: built.signal, errorText, fixedOutput }) };
}

/** The input derivations' outputs this derivation uses, and its sources; an error text when Nix cannot say. */
async function inputPathsOf(shown: z.infer<typeof Shown>[string], run: RunOptions): Promise<string[] | string> {
  const drvs = Object.keys(shown.inputDrvs);
  if (drvs.length === 0) return [...shown.inputSrcs];
  const result = await nix(['show-derivation', ...drvs], run);
  if (result.exitCode !== 0) return `nix show-derivation of the inputs: ${nixErrorText(result.stderr)}`;
  const inputs = Shown.parse(JSON.parse(result.stdout));
  const paths = [...shown.inputSrcs];
  for (const [drv, names] of Object.entries(shown.inputDrvs)) {
    for (const name of names) {
      const path = inputs[drv]?.outputs[name]?.path;
      if (path === undefined) return `${drv} has no output ${name} with a known path`;
      paths.push(path);
    }
  }
  return paths;
}

/**
 * After the build, each output is either built here by it (valid in this store with no deriving
 * source, `ultimate`, and not valid before: the ledger notes the keys its inputs rested on) or
 * acceptable for the job as any valid path is: one substituted meanwhile (by this build from the
 * job's caches, or by another job's Nix from its own) must pass the check too. The outputs
 * rejected; an error text when Nix cannot say.
 */
async function settleOutputs(
  trust: StoreTrust, outputs: Record<string, string>, validBefore: readonly string[], keys: readonly string[], scope: TrustScope, run: RunOptions,
  /** worker.build.builders: Nix built on those machines (an organization's build server) and copied the outputs back, not `ultimate` here */
  remote: boolean,
): Promise<string[] | string> {
  const shown = await nix(['path-info', '--json', ...Object.values(outputs)], run);
  const infos = shown.exitCode === 0 ? z.array(z.object({ path: z.string(), narHash: z.string(), ultimate: z.boolean().optional() })).safeParse(JSON.parse(shown.stdout)) : undefined;
  if (!infos?.success) return `nix path-info of the outputs built: ${nixErrorText(shown.stderr)}`;
  const built = infos.data.filter((info) => (info.ultimate === true || remote) && !validBefore.includes(info.path));
  // a ledger that cannot be written leaves these outputs unknown after a restart: looked up, not trusted
  await trust.recordBuilt(built, keys).catch(() => undefined);
  const others = infos.data.filter((info) => !built.includes(info)).map((info) => info.path);
  const verdict = await trust.check(others, scope, run).catch((e: unknown) => (e instanceof Error ? e.message : String(e)));
  return typeof verdict === 'string' ? verdict : verdict.rejected;
}
