// `kiln cache upload`: a dumped NAR with its narinfo (`--nar-file F --narinfo F <cache>`), or
// store paths of the local Nix store with their runtime closure in dependency order
// (`[--no-closure] <store-path>… <cache>`). Paths the cache already answers a narinfo for are
// skipped (HEAD {hash}.narinfo, so paths an upstream of the cache serves count as present too).
import { readFile, realpath, stat } from 'node:fs/promises';
import type { Command } from 'commander';
import { DEFAULT_STORE_DIR, parseNarinfo, storePathHashPart, type NarUploadInfo } from '../protocol/index.js';
import type { ApiClient } from './apiClient.js';
import { connect } from './clientConnection.js';
import { formatBytes, runClientCommand, UsageError, type Output } from './clientOutput.js';
import { dependencyOrder, dumpFrom, pathInfos, runtimeClosure } from './localStore.js';
import { narFileSource, uploadNar, type NarSource } from './narUpload.js';
import { progressBar } from './progressBar.js';

export interface UploadOutcome {
  store_path: string;
  /** added: stored now; held: the cache had this NAR; skipped: the cache already answered for the path */
  status: 'added' | 'held' | 'skipped';
  nar_size: number;
}

interface UploadOptions {
  narFile?: string;
  narinfo?: string;
  closure: boolean;
  json?: boolean;
}

async function uploadOne(client: ApiClient, out: Output, cache: string, info: NarUploadInfo, source: NarSource): Promise<UploadOutcome> {
  if (await client.narinfoExists(cache, storePathHashPart(info.store_path))) {
    out.note(`present  ${info.store_path}`);
    return { store_path: info.store_path, status: 'skipped', nar_size: info.nar_size };
  }
  const progress = out.json ? undefined : progressBar(info.store_path.slice(info.store_path.lastIndexOf('/') + 1), info.nar_size);
  const result = await uploadNar(client, cache, info, source, progress === undefined ? {} : { progress });
  out.note(`${result.status === 'added' ? 'uploaded' : 'present '} ${info.store_path} (${formatBytes(info.nar_size)})`);
  return { store_path: info.store_path, status: result.status, nar_size: info.nar_size };
}

/** The narinfo file's fields as the upload API takes them; problems name the file and the field. */
async function narinfoOfFile(file: string): Promise<NarUploadInfo> {
  const parsed = parseNarinfo(await readFile(file, 'utf8').catch((e: Error) => {
    throw new UsageError(`--narinfo: cannot read ${file}: ${e.message}`);
  }));
  if (!parsed.ok) throw new UsageError(`--narinfo ${file}: ${parsed.field}: ${parsed.reason}`);
  const n = parsed.value;
  return {
    store_path: n.storePath,
    nar_hash: n.narHash,
    nar_size: n.narSize,
    references: n.references,
    ...(n.deriver === undefined ? {} : { deriver: n.deriver }),
    ...(n.ca === undefined ? {} : { ca: n.ca }),
  };
}

async function uploadNarFile(client: ApiClient, out: Output, cache: string, narFile: string, narinfo: string): Promise<UploadOutcome[]> {
  const info = await narinfoOfFile(narinfo);
  const size = (await stat(narFile).catch((e: Error) => {
    throw new UsageError(`--nar-file: cannot read ${narFile}: ${e.message}`);
  })).size;
  if (size !== info.nar_size) {
    throw new UsageError(`--nar-file ${narFile} has ${size} bytes, but the narinfo's NarSize is ${info.nar_size} (kiln takes the plain NAR, as nix-store --dump writes it)`);
  }
  return [await uploadOne(client, out, cache, info, narFileSource(narFile, size))];
}

/** A store path as given (or a symlink into the store, like ./result), as the store path itself. */
async function storePathOf(arg: string): Promise<string> {
  const real = await realpath(arg).catch(() => arg);
  const match = new RegExp(`^(${DEFAULT_STORE_DIR}/[^/]+)`).exec(real);
  if (!match) throw new UsageError(`${arg} is not a path in ${DEFAULT_STORE_DIR}`);
  return match[1]!;
}

export async function uploadStorePaths(client: ApiClient, out: Output, cache: string, args: string[], closure: boolean): Promise<UploadOutcome[]> {
  const named = [...new Set(await Promise.all(args.map(storePathOf)))];
  const paths = closure ? await runtimeClosure(named) : named;
  const infos = await pathInfos(paths);
  const outcomes: UploadOutcome[] = [];
  for (const path of dependencyOrder(paths, infos)) {
    const info = infos.get(path)!;
    outcomes.push(await uploadOne(client, out, cache, info, { size: info.nar_size, open: (offset) => dumpFrom(path, offset) }));
  }
  return outcomes;
}

export const summary = (outcomes: UploadOutcome[]): string => {
  const uploaded = outcomes.filter((o) => o.status === 'added');
  const bytes = uploaded.reduce((sum, o) => sum + o.nar_size, 0);
  return `${uploaded.length} uploaded (${formatBytes(bytes)}), ${outcomes.length - uploaded.length} already present`;
};

export function cacheUploadCommand(cache: Command): void {
  cache
    .command('upload')
    .description('upload store paths (with their runtime closure) or a dumped NAR with its narinfo into a cache')
    .usage('[--no-closure] <store-path>... <cache>  |  --nar-file <file> --narinfo <file> <cache>')
    .argument('<args...>', 'store paths followed by the cache name, or only the cache name with --nar-file')
    .option('--nar-file <file>', 'a NAR as nix-store --dump writes it')
    .option('--narinfo <file>', 'the narinfo of --nar-file (StorePath, NarHash, NarSize, References are used)')
    .option('--no-closure', 'upload only the named paths, not what they reference')
    .option('--json', 'print the result as JSON')
    .action(async (args: string[], opts: UploadOptions) =>
      runClientCommand(opts.json === true, async (out) => {
        const cacheName = args[args.length - 1]!;
        const paths = args.slice(0, -1);
        let outcomes: UploadOutcome[];
        if (opts.narFile !== undefined || opts.narinfo !== undefined) {
          if (opts.narFile === undefined || opts.narinfo === undefined) throw new UsageError('--nar-file and --narinfo go together');
          if (paths.length > 0) throw new UsageError(`with --nar-file, give only the cache name (got ${args.length} arguments)`);
          const client = await connect();
          outcomes = await uploadNarFile(client, out, cacheName, opts.narFile, opts.narinfo);
        } else {
          if (paths.length === 0) throw new UsageError('give the store paths to upload, then the cache name');
          const client = await connect();
          outcomes = await uploadStorePaths(client, out, cacheName, paths, opts.closure);
        }
        out.result(outcomes, summary);
      }),
    );
}
