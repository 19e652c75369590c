// `kiln push` and `kiln watch-store` (issue 25 item 4, docs/cli.md "Pushing what Nix builds"):
// `push <cache> <path>…` uploads store paths with their runtime closure now; `push --from-hook`
// is Nix's post-build-hook, which only appends the build's OUT_PATHS to the queue (cli/pushQueue.ts)
// so a build never waits on the network nor fails because kiln is down; `watch-store <cache>`
// first queues the paths the Nix store registered since its last look (cli/storeScan.ts; not with
// --no-scan), then drains the queue into the cache, each path with its closure, skipping what the
// cache or its upstreams already hold, resuming interrupted uploads, and prints a summary when it stops.
import { stat } from 'node:fs/promises';
import { setTimeout as wait } from 'node:timers/promises';
import type { Command } from 'commander';
import { isApiRequestError } from './apiClient.js';
import { connect } from './clientConnection.js';
import { jsonOption, runClientCommand, UsageError, type Output } from './clientOutput.js';
import { summary, uploadStorePaths, type UploadOutcome } from './cacheUpload.js';
import { inert } from './inertText.js';
import { defaultQueueFile, enqueue, isStorePath, outputsOf, PushQueue } from './pushQueue.js';
import { derivationOutputs } from './localStore.js';
import { StoreScan } from './storeScan.js';

/** How long the watcher waits after a failed upload (the server down) before trying the path again. */
const RETRY_MS = 2000;

interface WatchOptions { queue?: string; intervalMs: string; once?: boolean; scan: boolean; json?: boolean }

/** Queues the store's new paths; those already waiting in the queue (a watcher killed before recording) are not queued again. */
async function queueNewPaths(scan: StoreScan, queue: PushQueue): Promise<void> {
  const { paths, through } = scan.newPaths();
  if (paths.length > 0) {
    const waiting = new Set((await queue.pending()).lines.map((l) => l.path));
    await enqueue(queue.file, paths.filter((p) => !waiting.has(p)));
  }
  await scan.record(through);
}

async function watchStore(cache: string, opts: WatchOptions, out: Output): Promise<UploadOutcome[]> {
  const interval = Number(opts.intervalMs);
  if (!Number.isFinite(interval) || interval < 10) throw new UsageError('--interval-ms is a number of milliseconds, at least 10');
  const queue = new PushQueue(opts.queue ?? defaultQueueFile());
  const client = await connect();
  const scan = opts.scan ? await StoreScan.open(`${queue.file}.scan`) : null;
  const outcomes: UploadOutcome[] = [];
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  out.note(`kiln: watching ${scan === null ? '' : 'the Nix store and '}${queue.file} for paths to push into cache "${cache}"`);
  try {
    while (!stop.signal.aborted) {
      if (scan !== null) await queueNewPaths(scan, queue);
      const { lines } = await queue.pending();
      for (const line of lines) {
        if (stop.signal.aborted) break;
        const drv = outputsOf(line.path);
        const paths = drv !== null ? await derivationOutputs(drv) : isStorePath(line.path) ? [line.path] : [];
        const present = await Promise.all(paths.map((p) => stat(p).then(() => true, () => false)));
        const valid = paths.length > 0 && present.every(Boolean);
        if (!valid) {
          // a line that is not (or no longer) a valid store path is passed over, once, with a word
          if (line.path !== '') out.note(`kiln: skipping ${inert(line.path.slice(0, 200))}: not a path in the local store`);
          await queue.done(line.end);
          continue;
        }
        for (;;) {
          try {
            outcomes.push(...(await uploadStorePaths(client, out, cache, paths, true)));
            break;
          } catch (e) {
            // a refusal (no such cache, no permission) stops the watcher with the queue intact
            if (isApiRequestError(e) && e.status >= 400 && e.status < 500 && e.status !== 408 && e.status !== 429) throw e;
            // the server or the network is down: the path stays first in line
            out.note(`kiln: pushing ${line.path} failed, trying again: ${e instanceof Error ? e.message : String(e)}`);
            await wait(RETRY_MS, undefined, { signal: stop.signal }).catch(() => undefined);
            if (stop.signal.aborted) return outcomes;
          }
        }
        await queue.done(line.end);
      }
      if (lines.length === 0) {
        await queue.compact();
        if (opts.once) break;
        await wait(interval, undefined, { signal: stop.signal }).catch(() => undefined);
      }
    }
  } finally {
    scan?.close();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  return outcomes;
}

export function pushCommands(program: Command): void {
  program.command('push').description('upload store paths with their runtime closure into a cache; --from-hook: queue the paths Nix\'s post-build-hook hands over for kiln watch-store')
    .argument('<cache>').argument('[paths...]', 'store paths, or links into the store such as ./result')
    .option('--from-hook', 'queue $OUT_PATHS (set by Nix for its post-build-hook) instead of uploading; never fails the build for want of the server')
    .option('--queue <file>', `the queue --from-hook appends to (default ${defaultQueueFile().replace(process.env['HOME'] ?? '\0', '~')})`)
    .option('--no-closure', 'upload only the named paths, not what they reference')
    .addOption(jsonOption())
    .action(async (cache: string, paths: string[], opts: { fromHook?: boolean; queue?: string; closure: boolean; json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      if (opts.fromHook) {
        if (paths.length > 0) throw new UsageError('--from-hook takes the paths from $OUT_PATHS, not the command line');
        const outPaths = (process.env['OUT_PATHS'] ?? '').split(/\s+/).filter((p) => p !== '');
        // Nix 2.8 leaves OUT_PATHS empty: then every output of DRV_PATH, looked up by the watcher
        const drv = process.env['DRV_PATH'] ?? '';
        const hooked = outPaths.length > 0 || drv === '' ? outPaths : [`${drv}!*`];
        const file = opts.queue ?? defaultQueueFile();
        await enqueue(file, hooked);
        out.result({ queued: hooked, queue: file }, (r) => `kiln: queued ${r.queued.length} paths in ${r.queue}`);
        return;
      }
      if (paths.length === 0) throw new UsageError('give the store paths to push after the cache name (or --from-hook in a post-build-hook)');
      out.result(await uploadStorePaths(await connect(), out, cache, paths, opts.closure), summary);
    }));

  program.command('watch-store').description('upload the store paths Nix registers from now on (and those `kiln push --from-hook` queues) into a cache, as they come; a summary on exit (Ctrl-C, SIGTERM, or --once when drained)')
    .argument('<cache>')
    .option('--no-scan', 'do not scan the Nix store; push only what the post-build-hook queues')
    .option('--queue <file>', 'the queue the post-build-hook appends to (as given to kiln push --from-hook)')
    .option('--interval-ms <ms>', 'how often an empty queue is looked at again', '500')
    .option('--once', 'stop when the queue is drained (the end of a CI job)')
    .addOption(jsonOption())
    .action(async (cache: string, opts: WatchOptions) => runClientCommand(opts.json === true, async (out) => {
      const outcomes = await watchStore(cache, opts, out);
      out.result(outcomes, summary);
    }));
}
