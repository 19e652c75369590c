// `kiln build [dir]` (the spec's "CLI build command", docs/cli.md): uploads the directory's flake
// source (cli/sourceArchive.ts) through POST /build-requests/source, evaluates it on the farm
// (POST /build-requests/source/{id}/evaluate), follows the evaluation as `kiln eval watch` does
// while each build's log streams to stderr with its name in front of every line (like `nix build
// -L`), and prints the entry points' output paths. --out-link realises them locally from a cache
// of the project, as `nix build` leaves ./result. Exit 1 when the evaluation or a build failed.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { spawn } from 'node:child_process';
import type { Command } from 'commander';
import type { BuildView, CacheView, ProjectDetails } from '../protocol/index.js';
import type { ApiClient } from './apiClient.js';
import { connect } from './clientConnection.js';
import { formatBytes, jsonOption, runClientCommand, UsageError } from './clientOutput.js';
import { evaluationFailed } from './evaluationText.js';
import { watchEvaluation } from './evalWatch.js';
import { inert } from './inertText.js';
import { sourceArchive } from './sourceArchive.js';

/** POST /build-requests/source's answer, the part used here */
interface SourceUploadAnswer { id: string; size: number; sha256: string }

interface BuildRunOptions { project?: string; task?: string; attr?: string; outLink?: string; cache?: string; logs: boolean; json?: boolean }

/** Each started build's log, its lines prefixed with the build's name; the streams end with their builds. */
function logFollower(client: ApiClient, stream: NodeJS.WritableStream) {
  const following = new Map<string, Promise<void>>();
  return {
    onBuild(build: BuildView) {
      if (following.has(build.build_id) || build.status === 'queued' || build.status === 'substituted') return;
      let partial = '';
      const prefix = `${inert(build.name)}> `;
      const write = (text: string) => {
        const lines = (partial + text).split('\n');
        partial = lines.pop() ?? '';
        for (const line of lines) stream.write(`${prefix}${inert(line)}\n`);
      };
      following.set(build.build_id, client.stream('POST', `/builds/${build.build_id}/log`, write)
        .then(() => (partial === '' ? undefined : void stream.write(`${prefix}${inert(partial)}\n`)))
        .catch((e: unknown) => void stream.write(`kiln: the log of ${inert(build.name)} could not be followed: ${e instanceof Error ? e.message : String(e)}\n`)));
    },
    done: () => Promise.all(following.values()),
  };
}

function runNix(command: string, args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', (e) => reject(new Error(`cannot run ${command}: ${e.message} (is Nix installed and on the PATH?)`, { cause: e })));
    child.on('close', (code) => resolvePromise({ code, stderr }));
  });
}

/** Realises `paths` from the cache (its key trusted for this call only) with GC roots `<link>`, `<link>-2`, … */
async function realiseLinks(client: ApiClient, cacheName: string, paths: string[], link: string): Promise<string[]> {
  const cache = await client.call<CacheView>('GET', `/caches/${encodeURIComponent(cacheName)}`);
  const dir = mkdtempSync(join(tmpdir(), 'kiln-build-'));
  try {
    // the cache may be private: Nix sends the token as HTTP Basic from a netrc only this account reads
    const netrc = join(dir, 'netrc');
    writeFileSync(netrc, `machine ${new URL(cache.url).hostname} login kiln password ${client.settings.token}\n`, { mode: 0o600 });
    const links: string[] = [];
    for (const [i, path] of paths.entries()) {
      const target = resolve(i === 0 ? link : `${link}-${i + 1}`);
      const run = await runNix('nix-store', [
        '--realise', path, '--add-root', target, '--indirect',
        '--option', 'substituters', cache.url, '--option', 'trusted-public-keys', cache.public_key, '--option', 'netrc-file', netrc,
      ]);
      if (run.code !== 0) throw new Error(`nix-store --realise ${path} from cache "${cacheName}" failed: ${run.stderr.trim().slice(-2000)}`);
      links.push(target);
    }
    return links;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function buildRunCommand(build: Command): void {
  build.argument('[dir]', 'the flake\'s directory', '.')
    .option('-p, --project <org/project>', 'the project to build it as (its caches and workers); required')
    .option('--task <task>', 'the task whose wildcard applies (default: "upload", which takes the project\'s)')
    .option('--attr <wildcard>', 'the attributes to build, e.g. "packages.x86_64-linux.default"')
    .option('-o, --out-link <path>', 'realise the outputs here from the project\'s cache (like nix build\'s ./result)')
    .option('--cache <cache>', 'the cache --out-link substitutes from (default: the project\'s first)')
    .option('--no-logs', 'do not stream the build logs')
    .addOption(jsonOption())
    .action(async (dir: string, opts: BuildRunOptions) => runClientCommand(opts.json === true, async (out) => {
      if (!opts.project) throw new UsageError('name the project to build as: kiln build --project org/project [dir]');
      const client = await connect();
      const archive = await sourceArchive(resolve(dir));
      out.note(`kiln: uploading ${archive.files} files (${formatBytes(archive.size)}, from ${archive.from === 'git' ? 'git\'s file list' : 'the directory'})`);
      const upload = await client
        .call<SourceUploadAnswer>('POST', '/build-requests/source', { file: { path: archive.file, size: archive.size }, query: { project: opts.project } })
        .finally(() => archive.remove());
      const evaluation = await client.call<string>('POST', `/build-requests/source/${upload.id}/evaluate`, {
        body: { ...(opts.task ? { task: opts.task } : {}), ...(opts.attr ? { attr: opts.attr } : {}) },
      });
      out.note(`kiln: evaluation ${evaluation}`);
      const logs = opts.logs && !out.json ? logFollower(client, process.stderr) : null;
      const result = await watchEvaluation(client, evaluation, out, process.stderr, { report: false, ...(logs ? { lines: true, onBuild: logs.onBuild } : {}) });
      await logs?.done();
      const entryPoints = result.builds.filter((b) => b.entry_point);
      const outputs = entryPoints.flatMap((b) => Object.values(b.outputs).filter((p): p is string => p !== null));
      const failed = evaluationFailed(result.evaluation);
      let links: string[] = [];
      if (!failed && opts.outLink && outputs.length > 0) {
        const cacheName = opts.cache ?? (await client.call<ProjectDetails>('GET', `/projects/${opts.project.split('/').map(encodeURIComponent).join('/')}/details`)).subscriptions.subscriptions[0]?.cache;
        if (!cacheName) throw new Error(`project ${opts.project} writes to no cache, so --out-link has nowhere to substitute from; name one with --cache`);
        links = await realiseLinks(client, cacheName, outputs, opts.outLink);
      }
      out.result({
        evaluation: result.evaluation.id, phase: result.evaluation.phase, upload: upload.id,
        builds: entryPoints.map((b) => ({ build_id: b.build_id, attr: b.attr, status: b.status, outputs: b.outputs })), links,
      }, (r) => (failed ? `evaluation ${r.evaluation} ${r.phase}${result.evaluation.error ? `: ${inert(result.evaluation.error)}` : ''}; failed builds: ${result.builds.filter((b) => b.status === 'failed').map((b) => inert(b.name)).join(', ') || 'none'}` : outputs.join('\n')));
      if (failed) process.exitCode = 1;
    }));
}
