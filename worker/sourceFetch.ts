// An uploaded source tree for an evaluation (`kiln build`, docs/builds.md "Evaluating a source
// upload"): the tarball is downloaded from the job's capability URL into the worker's private tmp
// directory, checked against the SHA-256 the server recorded, and unpacked into the Nix store by
// Nix itself (nix-prefetch-url --unpack, which strips the single top-level directory). The flake is
// then `path:<store path>?narHash=…`, a locked reference pure evaluation accepts.
import { randomUUID } from 'node:crypto';
import { rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { jobFailure, type EvalJob } from '../protocol/index.js';
import { runCommand } from './childProcess.js';
import { downloadHashed } from './hashedDownload.js';
import type { Checkout } from './gitCheckout.js';
import { nix, nixErrorText } from './nixCli.js';
import { ensurePrivateDirectory } from './privateDirectories.js';

type Source = NonNullable<EvalJob['source']>;

export async function fetchSource(baseDir: string, source: Source, env: NodeJS.ProcessEnv, signal: AbortSignal): Promise<Checkout> {
  const dir = join(baseDir, 'tmp');
  await ensurePrivateDirectory(dir);
  const file = join(dir, `source-${randomUUID()}`);
  const failed = (message: string) => ({ ok: false as const, failure: jobFailure(signal.aborted ? 'cancelled' : 'fetch_failed', signal.aborted ? 'the fetch was cancelled' : message) });
  try {
    const got = await downloadHashed(source.url, file, signal).catch((e: unknown) => ({ error: e instanceof Error ? e.message : String(e) }));
    if ('error' in got) return failed(`downloading the uploaded source failed: ${got.error}`);
    if (got.sha256 !== source.sha256) return failed(`the uploaded source's SHA-256 is ${got.sha256}, not the ${source.sha256} the server recorded`);
    const unpacked = await runCommand('nix-prefetch-url', ['--unpack', '--print-path', '--name', 'source', pathToFileURL(file).href], { env, signal });
    if (unpacked.aborted) return failed('cancelled');
    const [base32, storePath] = unpacked.stdout.trim().split('\n');
    if (unpacked.exitCode !== 0 || !base32 || !storePath) return { ok: false, failure: jobFailure('eval_error', `the uploaded source could not be unpacked: ${nixErrorText(unpacked.stderr)}`) };
    if (!(await stat(storePath)).isDirectory()) {
      return { ok: false, failure: jobFailure('eval_error', 'the uploaded source is a single file, not a directory tree with flake.nix') };
    }
    const sri = await nix(['hash', 'to-sri', '--type', 'sha256', base32], { env, signal });
    if (sri.exitCode !== 0) return { ok: false, failure: jobFailure('worker_error', `nix hash to-sri failed: ${nixErrorText(sri.stderr)}`) };
    return { ok: true, clone: storePath, flakeRef: `path:${storePath}?narHash=${encodeURIComponent(sri.stdout.trim())}` };
  } finally {
    await rm(file, { force: true });
  }
}
