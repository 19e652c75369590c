// `kiln cache pin|unpin|pins` and `kiln admin gc [--deep]` (issue 20, docs/gc.md): pins keep a
// path and its runtime closure in a cache whatever its age; a superuser requests a collection pass
// or a deep round and, unless --no-wait, follows it until it ends.
import { setTimeout as wait } from 'node:timers/promises';
import type { Command } from 'commander';
import { ApiRequestError } from './apiClient.js';
import { connect } from './clientConnection.js';
import { formatTable, jsonOption, runClientCommand, UsageError } from './clientOutput.js';
import { hashArgument } from './hashArgument.js';

interface PinView {
  hash: string;
  store_path: string | null;
  created_by: string | null;
  created_at: string;
  expires_at: string | null;
  expired: boolean;
}

interface GcRunView {
  id: string;
  kind: 'pass' | 'deep';
  state: 'requested' | 'running' | 'finished' | 'failed';
  result: Record<string, unknown> | null;
  error: string | null;
}

const cachePath = (cache: string) => `/caches/${encodeURIComponent(cache)}`;
/** How often `kiln admin gc` asks whether its run ended. */
const POLL_MS = 1000;

function hours(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  if (!/^[1-9][0-9]{0,6}$/.test(text)) throw new UsageError(`--expires-in-hours takes a whole number of hours from 1, not ${JSON.stringify(text)}`);
  return Number(text);
}

interface PinPage {
  pins: PinView[];
  page: number;
  per_page: number;
  total: number;
}

/** At most this long between tries when the server's pin-write bucket is empty (it says how long in Retry-After). */
const MAX_RATE_WAIT_MS = 60_000;

/** One pin write; a 429 (the user's pin-write bucket is empty) waits as long as Retry-After says and tries again. */
async function pinWrite<T>(write: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await write();
    } catch (e) {
      if (!(e instanceof ApiRequestError) || e.status !== 429) throw e;
      const seconds = Number(e.headers.get('retry-after'));
      await wait(Math.min(MAX_RATE_WAIT_MS, Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : 1000));
    }
  }
}

export function cachePinCommands(cache: Command): void {
  cache.command('pin').description('keep paths and their runtime closures in a cache whatever their age (writeStore)')
    .argument('<cache>').argument('<store-path...>', 'store paths or their hash parts')
    .option('--expires-in-hours <n>', 'the pins lapse after this many hours (default: never)')
    .addOption(jsonOption())
    .action(async (name: string, paths: string[], opts: { expiresInHours?: string; json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const expires = hours(opts.expiresInHours);
      const hashes = paths.map(hashArgument);
      const client = await connect();
      const pins: PinView[] = [];
      for (const hash of hashes) {
        pins.push(await pinWrite(() => client.call<PinView>('PUT', `${cachePath(name)}/pins/${hash}`, { body: expires === undefined ? {} : { expires_in_hours: expires } })));
      }
      out.result(pins, (ps) => ps.map((p) => `pinned ${p.store_path ?? p.hash} in cache "${name}"${p.expires_at ? ` until ${p.expires_at}` : ''}`).join('\n'));
    }));

  cache.command('unpin').description('remove pins; the paths are collected by the usual rules again').argument('<cache>').argument('<store-path...>')
    .addOption(jsonOption())
    .action(async (name: string, paths: string[], opts: { json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const hashes = paths.map(hashArgument);
      const client = await connect();
      for (const hash of hashes) await pinWrite(() => client.call('DELETE', `${cachePath(name)}/pins/${hash}`));
      out.result({ cache: name, unpinned: hashes }, (r) => r.unpinned.map((h) => `unpinned ${h} in cache "${r.cache}"`).join('\n'));
    }));

  cache.command('pins').description('the pins of a cache, newest first, a page at a time').argument('<cache>')
    .option('--page <n>', 'page number, from 1')
    .option('--per-page <n>', 'pins per page (default 50, at most 200)')
    .addOption(jsonOption())
    .action(async (name: string, opts: { page?: string; perPage?: string; json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const page = await (await connect()).call<PinPage>('GET', `${cachePath(name)}/pins`, { query: { page: opts.page, per_page: opts.perPage } });
      out.result(page, (p) => [
        formatTable(['HASH', 'STORE PATH', 'BY', 'EXPIRES'], p.pins.map((pin) => [
          pin.hash, pin.store_path ?? '-', pin.created_by ?? '-', pin.expires_at === null ? 'never' : `${pin.expires_at}${pin.expired ? ' (expired)' : ''}`,
        ])),
        `page ${p.page} of ${Math.max(1, Math.ceil(p.total / p.per_page))} (${p.total} pin${p.total === 1 ? '' : 's'})`,
      ].join('\n'));
    }));
}

export function adminCommands(program: Command): void {
  const admin = program.command('admin').description('instance administration (superusers)');
  admin.command('gc').description('run a garbage collection pass now, or with --deep a deep round, and print its results')
    .option('--deep', 'a deep round: blob files against rows, unreferenced blobs, stray files')
    .option('--no-wait', 'return once requested')
    .addOption(jsonOption())
    .action(async (opts: { deep?: boolean; wait: boolean; json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const client = await connect();
      let run = await client.call<GcRunView>('POST', '/admin/gc', { body: { deep: opts.deep === true } });
      while (opts.wait && (run.state === 'requested' || run.state === 'running')) {
        await wait(POLL_MS);
        run = await client.call<GcRunView>('GET', `/admin/gc/${run.id}`);
      }
      if (run.state === 'failed') throw new UsageError(`the ${run.kind === 'deep' ? 'deep round' : 'collection pass'} ${run.id} failed: ${run.error ?? 'no reason given'}`, 'gc_failed');
      out.result(run, (r) => [
        `${r.kind === 'deep' ? 'Deep round' : 'Pass'} ${r.id}: ${r.state}`,
        ...Object.entries(r.result ?? {}).map(([k, v]) => `  ${k}: ${typeof v === 'object' ? JSON.stringify(v) : String(v)}`),
      ].join('\n'));
    }));
}
