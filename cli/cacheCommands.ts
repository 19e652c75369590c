// `kiln cache …`: the client commands of the spec ("Client commands for cached NARs") against a
// server found by clientConfig.ts: `cache nar list|show|delete|stats`, `cache upload` (in
// cacheUpload.ts), `cache list|key|keys` to find a cache and the keys to trust, and `cache
// rotate-key` to give a cache a new signing key.
import { Command, Option } from 'commander';
import { MAX_KEY_OVERLAP_HOURS, storePathName } from '../protocol/index.js';
import { connect } from './clientConnection.js';
import { formatBytes, formatDate, formatTable, jsonOption, runClientCommand, UsageError } from './clientOutput.js';
import { requireConfirmation } from './confirmation.js';
import { cacheUploadCommand } from './cacheUpload.js';
import { cachePinCommands } from './gcCommands.js';
import { hashArgument } from './hashArgument.js';

interface NarView {
  hash: string;
  store_path: string;
  nar_hash: string;
  nar_size: number;
  file_size: number;
  references: string[];
  deriver: string | null;
  ca: string | null;
  signature: string;
  created_at: string;
  last_fetched_at: string | null;
  caches?: number;
}

interface NarPage {
  items: NarView[];
  page: number;
  per_page: number;
  total: number;
  pages: number;
}

interface CacheKeys {
  public_key: string;
  previous: { public_key: string; rotated_at: string; listed_until: string } | null;
}

/** The keys to trust, one per line, the previous one with its end. */
const showKeys = (k: CacheKeys): string =>
  [`Current:   ${k.public_key}`, ...(k.previous ? [`Previous:  ${k.previous.public_key} (listed until ${k.previous.listed_until})`] : [])].join('\n');

function overlapHours(text: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || n > MAX_KEY_OVERLAP_HOURS) throw new UsageError(`--overlap-hours: ${JSON.stringify(text)} is not a whole number of hours from 0 to ${MAX_KEY_OVERLAP_HOURS}`);
  return n;
}

const cachePath = (cache: string) => `/caches/${encodeURIComponent(cache)}`;
const date = formatDate;

function showNar(n: NarView): string {
  return [
    `StorePath:   ${n.store_path}`,
    `Hash:        ${n.hash}`,
    `NarHash:     ${n.nar_hash}`,
    `NarSize:     ${n.nar_size} (${formatBytes(n.nar_size)})`,
    `Stored:      ${n.file_size} (${formatBytes(n.file_size)})`,
    `References:  ${n.references.join(' ') || '-'}`,
    `Deriver:     ${n.deriver ?? '-'}`,
    ...(n.ca ? [`CA:          ${n.ca}`] : []),
    `Signature:   ${n.signature}`,
    `Uploaded:    ${date(n.created_at)}`,
    `Last fetch:  ${date(n.last_fetched_at)}`,
    ...(n.caches === undefined ? [] : [`Caches:      ${n.caches}`]),
  ].join('\n');
}

export function cacheCommands(program: Command): void {
  const cache = program.command('cache').description('binary caches on a kiln server (see kiln login)');

  cache.command('list').description('the caches you may see').addOption(jsonOption())
    .action(async (opts: { json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const caches = await (await connect()).call<{ name: string; public: boolean; priority: number; owner: string | null; url: string }[]>('GET', '/caches');
      out.result(caches, (cs) => formatTable(['NAME', 'VISIBILITY', 'PRIORITY', 'OWNER', 'URL'], cs.map((c) => [c.name, c.public ? 'public' : 'private', String(c.priority), c.owner ?? '-', c.url])));
    }));

  cache.command('create').description('create a cache you own; its signing key is made at once').argument('<cache>')
    .option('--public', 'anyone may substitute from it (default: private, for members and API keys)')
    .option('--priority <n>', 'the Priority Nix is told (lower is asked first; default 40)')
    .option('--description <text>')
    .addOption(jsonOption())
    .action(async (name: string, opts: { public?: boolean; priority?: string; description?: string; json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      if (opts.priority !== undefined && !/^\d{1,4}$/.test(opts.priority)) throw new UsageError(`--priority: ${JSON.stringify(opts.priority)} is not a whole number`);
      const body = { name, public: opts.public === true, ...(opts.priority === undefined ? {} : { priority: Number(opts.priority) }), ...(opts.description === undefined ? {} : { description: opts.description }) };
      const made = await (await connect()).call<{ name: string; public: boolean; public_key: string }>('PUT', '/caches', { body });
      out.result(made, (c) => `created ${c.public ? 'public' : 'private'} cache "${c.name}"; trust its key with: extra-trusted-public-keys = ${c.public_key}`);
    }));

  cache.command('keys').description('the public keys a client may trust now: the current one, and the previous one during a rotation\'s overlap').argument('<cache>').addOption(jsonOption())
    .action(async (name: string, opts: { json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      out.result(await (await connect()).call<CacheKeys>('GET', `${cachePath(name)}/keys`), showKeys);
    }));

  cache.command('rotate-key').description('give a cache a new signing key; the old one stays listed for the overlap (manageCache)').argument('<cache>')
    .option('--overlap-hours <hours>', 'hours the old key stays listed (default: the server\'s cache.keyOverlapHours)')
    .option('--force', 'rotate even within cache.keyRotationMinIntervalSecs of the last rotation (a leaked key; the cache\'s owner or a superuser; recorded)')
    .option('-y, --yes', 'do not ask for confirmation (required with --json)')
    .addOption(jsonOption())
    .action(async (name: string, opts: { overlapHours?: string; force?: boolean; yes?: boolean; json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const body = { ...(opts.overlapHours === undefined ? {} : { overlap_hours: overlapHours(opts.overlapHours) }), ...(opts.force === true ? { force: true } : {}) };
      const client = await connect();
      await requireConfirmation(`Rotate the signing key of cache "${name}"? Clients must trust the new key before the overlap ends.`, { yes: opts.yes === true, json: opts.json === true }, 'rotated');
      out.result(await client.call<CacheKeys>('POST', `${cachePath(name)}/key/rotate`, { body }), showKeys);
    }));

  cache.command('key').description('the public key to add to Nix\'s trusted-public-keys').argument('<cache>').addOption(jsonOption())
    .action(async (name: string, opts: { json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const key = await (await connect()).call<string>('GET', `${cachePath(name)}/key`);
      out.result({ cache: name, public_key: key }, (r) => r.public_key);
    }));

  const nar = cache.command('nar').description('the store paths (NARs) a cache holds');

  nar.command('list').description('list a cache\'s paths, newest first by default').argument('<cache>')
    .option('--hash <prefix>', 'only paths whose hash starts with this')
    .option('--package <substring>', 'only paths whose name contains this')
    .addOption(new Option('--sort <key>', 'sort key').choices(['created_at', 'nar_size', 'last_fetched_at']))
    .addOption(new Option('--order <order>', 'sort order').choices(['asc', 'desc']))
    .option('--page <n>', 'page number, from 1')
    .option('--per-page <n>', 'paths per page (default 50, at most 200)')
    .addOption(jsonOption())
    .action(async (name: string, opts: { hash?: string; package?: string; sort?: string; order?: string; page?: string; perPage?: string; json?: boolean }) =>
      runClientCommand(opts.json === true, async (out) => {
        const page = await (await connect()).call<NarPage>('GET', `${cachePath(name)}/nars`, {
          query: { hash: opts.hash, package: opts.package, sort: opts.sort, order: opts.order, page: opts.page, per_page: opts.perPage },
        });
        out.result(page, (p) => [
          formatTable(['HASH', 'NAME', 'NAR SIZE', 'UPLOADED', 'LAST FETCH'], p.items.map((n) => [
            n.hash, storePathName(n.store_path), formatBytes(n.nar_size), date(n.created_at), date(n.last_fetched_at),
          ])),
          `page ${p.page} of ${Math.max(1, p.pages)} (${p.total} path${p.total === 1 ? '' : 's'})`,
        ].join('\n'));
      }));

  nar.command('show').description('one path of a cache').argument('<cache>').argument('<hash>', 'the hash part, or the store path')
    .addOption(jsonOption())
    .action(async (name: string, hash: string, opts: { json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const shown = await (await connect()).call<NarView>('GET', `${cachePath(name)}/nars/${hashArgument(hash)}`);
      out.result(shown, showNar);
    }));

  nar.command('delete').description('delete a path from a cache (the cache owner only)').argument('<cache>').argument('<hash>', 'the hash part, or the store path')
    .option('-y, --yes', 'do not ask for confirmation (required with --json)')
    .addOption(jsonOption())
    .action(async (name: string, hash: string, opts: { yes?: boolean; json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const hashPart = hashArgument(hash);
      const client = await connect();
      await requireConfirmation(`Delete ${hashPart} from cache "${name}"?`, { yes: opts.yes === true, json: opts.json === true }, 'deleted');
      const deleted = await client.call<{ store_path: string; cache: string; last_copy: boolean }>('DELETE', `${cachePath(name)}/nars/${hashPart}`);
      out.result(deleted, (d) => `deleted ${d.store_path} from cache "${d.cache}"${d.last_copy ? ' (no cache holds it any more; its NAR file is removed)' : ''}`);
    }));

  nar.command('stats').description('a cache\'s path count, sizes and storage left').argument('<cache>').addOption(jsonOption())
    .action(async (name: string, opts: { json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const stats = await (await connect()).call<{ cache: string; paths: number; nar_bytes: number; stored_bytes: number; last_upload_at: string | null; last_fetched_at: string | null; bytes_left: number | null }>('GET', `${cachePath(name)}/stats`);
      out.result(stats, (s) => [
        `Cache:        ${s.cache}`,
        `Paths:        ${s.paths}`,
        `NAR size:     ${s.nar_bytes} (${formatBytes(s.nar_bytes)})`,
        `Stored:       ${s.stored_bytes} (${formatBytes(s.stored_bytes)})`,
        `Space left:   ${s.bytes_left === null ? 'no limit' : `${s.bytes_left} (${formatBytes(s.bytes_left)})`}`,
        `Last upload:  ${date(s.last_upload_at)}`,
        `Last fetch:   ${date(s.last_fetched_at)}`,
      ].join('\n'));
    }));

  cacheUploadCommand(cache);
  cachePinCommands(cache);
}
