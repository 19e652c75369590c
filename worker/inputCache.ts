// The worker's side of the shared evaluation cache (docs/eval-cache.md). flake.lock pins each
// locked input's narHash, and Nix puts the input at the fixed-output path that hash names (the
// "source" path of the NAR's SHA-256); a locked input whose path is valid is not fetched again.
// So before evaluating, the worker restores the inputs its store lacks from the organization's
// blobs on the server: the NAR is downloaded and its SHA-256 checked against the lock, unpacked
// with `nix-store --restore` and added with `nix-store --add-fixed --recursive sha256`, which
// computes the path from the content itself; the path must be the one the lock names. No signature
// is trusted: a blob that is not the pinned tree lands nowhere. After fetching inputs from their
// origins, the worker uploads those the server lacks.
import { randomUUID } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { contentAddressClaim, parseHash } from '../protocol/index.js';
import type { FlakeLocks } from './flakeInputPolicy.js';
import { inParallel } from './jobContext.js';
import { downloadHashed } from './hashedDownload.js';
import { dumpNar } from './narDump.js';
import { nixErrorText, nixStore } from './nixCli.js';
import { realStorePath } from './ownStore.js';
import { ensurePrivateDirectory } from './privateDirectories.js';

/** the capability of the evaluation job (evalJob.inputCache) */
export interface InputCacheAccess {
  url: string;
  token: string;
}

export interface LockedInput {
  /** the NAR's SHA-256, hex */
  narHash: string;
  /** where Nix puts the input: /nix/store/<hash>-source */
  storePath: string;
}

/** Transfers to or from the server at once, per evaluation. */
export const INPUT_TRANSFERS = 2;
/** Nix names every fetched flake input's tree "source". */
const INPUT_NAME = 'source';

/** The inputs of the lock (the root excepted) that pin a SHA-256 narHash, each once. */
export function lockedInputs(locks: FlakeLocks): LockedInput[] {
  const found = new Map<string, LockedInput>();
  for (const [key, node] of Object.entries(locks.nodes)) {
    const narHash = key === locks.root ? undefined : node.locked?.['narHash'];
    if (typeof narHash !== 'string') continue;
    const parsed = parseHash(narHash);
    if (!parsed.ok || parsed.value.algorithm !== 'sha256') continue;
    const hex = Buffer.from(parsed.value.digest).toString('hex');
    // the path of `nix-store --add-fixed --recursive sha256`: content-addressed, no references
    const claim = contentAddressClaim(`fixed:r:sha256:${hex}`, INPUT_NAME, [], false);
    if (claim) found.set(hex, { narHash: hex, storePath: claim.path });
  }
  return [...found.values()];
}

/** Those of `inputs` whose path is not valid in the worker's store. */
export async function invalidInputs(inputs: readonly LockedInput[], env: NodeJS.ProcessEnv, signal: AbortSignal): Promise<LockedInput[]> {
  if (inputs.length === 0) return [];
  const result = await nixStore(['--check-validity', '--print-invalid', ...inputs.map((i) => i.storePath)], { env, signal });
  if (result.exitCode !== 0) throw new Error(`nix-store --check-validity failed: ${nixErrorText(result.stderr)}`);
  const invalid = new Set(result.stdout.split('\n').filter(Boolean));
  return inputs.filter((i) => invalid.has(i.storePath));
}

const withToken = (access: InputCacheAccess, path: string) => `${access.url}/${path}?token=${encodeURIComponent(access.token)}`;

/** Which of `inputs` the organization has on the server. */
async function presentOnServer(access: InputCacheAccess, inputs: readonly LockedInput[], signal: AbortSignal): Promise<Set<string>> {
  if (inputs.length === 0) return new Set();
  const res = await fetch(withToken(access, 'query'), {
    method: 'POST', signal, redirect: 'error', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ narHashes: inputs.map((i) => i.narHash) }),
  });
  if (!res.ok) throw new Error(`the server answered ${res.status} to the query of the shared evaluation cache`);
  const body = (await res.json()) as { message?: { present?: unknown } };
  const present = body.message?.present;
  return new Set(Array.isArray(present) ? present.filter((h): h is string => typeof h === 'string') : []);
}

export interface RestoreOptions {
  /** worker.baseDir: downloads go to its private tmp directory */
  baseDir: string;
  env: NodeJS.ProcessEnv;
  signal: AbortSignal;
}

export interface TransferReport {
  /** inputs restored from (or uploaded to) the server */
  done: string[];
  /** what went wrong, one line per input; never fatal: Nix fetches from the origin instead */
  problems: string[];
}

/** Restores, from the organization's blobs, those of `missing` the server has. */
export async function restoreInputs(access: InputCacheAccess, missing: readonly LockedInput[], options: RestoreOptions): Promise<TransferReport> {
  const report: TransferReport = { done: [], problems: [] };
  const present = await presentOnServer(access, missing, options.signal);
  const wanted = missing.filter((i) => present.has(i.narHash));
  if (wanted.length === 0) return report;
  const tmp = join(options.baseDir, 'tmp');
  await ensurePrivateDirectory(tmp);
  await inParallel(wanted, INPUT_TRANSFERS, async (input) => {
    try {
      await restoreOne(access, input, tmp, options);
      report.done.push(input.storePath);
    } catch (e) {
      if (options.signal.aborted) throw e;
      report.problems.push(`${input.storePath}: ${e instanceof Error ? e.message : String(e)}`);
    }
  });
  return report;
}

async function restoreOne(access: InputCacheAccess, input: LockedInput, tmp: string, options: RestoreOptions): Promise<void> {
  const { env, signal } = options;
  const work = join(tmp, `input-${randomUUID()}`);
  await mkdir(work, { mode: 0o700 });
  try {
    const nar = join(work, 'nar');
    const downloaded = await downloadHashed(withToken(access, input.narHash), nar, signal);
    if ('error' in downloaded) throw new Error(downloaded.error);
    const got = downloaded.sha256;
    if (got !== input.narHash) throw new Error(`the server's NAR has SHA-256 ${got}, not the ${input.narHash} flake.lock pins`);
    const tree = join(work, INPUT_NAME);
    const restored = await nixStore(['--restore', tree], { env, signal, stdinFile: nar });
    if (restored.exitCode !== 0) throw new Error(`nix-store --restore failed: ${nixErrorText(restored.stderr)}`);
    const added = await nixStore(['--add-fixed', '--recursive', 'sha256', tree], { env, signal });
    if (added.exitCode !== 0) throw new Error(`nix-store --add-fixed failed: ${nixErrorText(added.stderr)}`);
    const path = added.stdout.trim();
    if (path !== input.storePath) throw new Error(`the restored tree was added as ${path}, not ${input.storePath}`);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

export interface UploadOptions {
  /** worker.storeRoot: where the store's files are on disk; null: the paths themselves */
  storeRoot: string | null;
  env: NodeJS.ProcessEnv;
  signal: AbortSignal;
}

/** Uploads those of `inputs` that are valid here and that the organization lacks on the server. */
export async function uploadInputs(access: InputCacheAccess, inputs: readonly LockedInput[], options: UploadOptions): Promise<TransferReport> {
  const report: TransferReport = { done: [], problems: [] };
  const invalid = new Set((await invalidInputs(inputs, options.env, options.signal)).map((i) => i.narHash));
  const valid = inputs.filter((i) => !invalid.has(i.narHash));
  const present = await presentOnServer(access, valid, options.signal);
  const wanted = valid.filter((i) => !present.has(i.narHash));
  await inParallel(wanted, INPUT_TRANSFERS, async (input) => {
    try {
      const body = Readable.toWeb(Readable.from(dumpNar(realStorePath(options.storeRoot, input.storePath)))) as ReadableStream<Uint8Array>;
      const res = await fetch(withToken(access, input.narHash), {
        method: 'PUT', signal: options.signal, redirect: 'error', body, duplex: 'half', headers: { 'content-type': 'application/x-nix-nar' },
      } as RequestInit);
      if (!res.ok) throw new Error(`the server answered ${res.status}: ${(await res.text()).slice(0, 500)}`);
      report.done.push(input.storePath);
    } catch (e) {
      if (options.signal.aborted) throw e;
      report.problems.push(`${input.storePath}: ${e instanceof Error ? e.message : String(e)}`);
    }
  });
  return report;
}
