// One `nix-daemon --stdio` session over SSH (`ssh-ng://CACHE@kiln`): Nix's worker protocol
// (libstore/daemon.cc, worker-protocol.hh) answered from one kiln cache. Reads come from what the
// cache serves over HTTP (its narinfo, signed with its key, and its stored NAR); AddToStoreNar
// goes through the same ingest front door as `nix copy --to http://…` (services/caches/narIngest.ts):
// NarHash/NarSize checked, signed with the cache's key, events announced. An operation kiln does
// not answer gets the protocol's error and the session ends: its arguments were never read, so
// the stream cannot be followed any further.
import {
  ApiError,
  DEFAULT_STORE_DIR,
  formatHash,
  parseHash,
  STDERR_LAST,
  wireDaemonError,
  WireError,
  WireReader,
  readImportedPathInfo,
  wireString,
  wireStrings,
  wireU64,
  WORKER_MAGIC_1,
  WORKER_MAGIC_2,
  type Narinfo,
} from '../../protocol/index.js';
import type { PreparedIngest } from '../../storage/index.js';
import { cachePaths, type CachePaths, type CachePathsDeps, type SessionStore } from './cachePaths.js';
import { buildDerivationFailure, readBasicDerivationOutputs, type FarmBuilds } from './farmBuilds.js';
import { SessionEnds, StoreRefusal } from './sessionErrors.js';

/**
 * The protocol version kiln speaks: 1.32. From 1.32 a client sends `nix copy --to` as one
 * AddMultipleToStore stream (no round trip per path); an older one sends each path with
 * AddToStoreNar. Nix 2.8 speaks 1.34 and negotiates down (1.33 adds the daemon's version string,
 * 1.34 BuildPathsWithResults).
 */
export const DAEMON_PROTOCOL_MINOR = 32;
const PROTOCOL_VERSION = (1 << 8) | DAEMON_PROTOCOL_MINOR;

const op = {
  isValidPath: 1,
  buildPaths: 9,
  addTempRoot: 11,
  setOptions: 19,
  queryPathInfo: 26,
  queryPathFromHashPart: 29,
  queryValidPaths: 31,
  narFromPath: 38,
  buildDerivation: 36,
  addToStoreNar: 39,
  queryMissing: 40,
  addMultipleToStore: 44,
} as const;

/** STDERR_NEXT: a log line for the client, before the operation's STDERR_LAST. */
const STDERR_NEXT = 0x6f6c6d67;
/** BuildResult::Status values kiln answers BuildDerivation with. */
const BUILT = 0;
const MISC_FAILURE = 9;

/** Paths of one AddMultipleToStore stream ingested at once while the stream is read on. */
const INGESTS_IN_FLIGHT = 8;
/** Paths of one AddMultipleToStore stream committed together (one transaction, one events transaction). */
const BATCH_PATHS = 64;
/** ...or fewer, once their NARs reach this many bytes (their compressed files wait on disk until the commit). */
const BATCH_BYTES = 64 << 20;
/** Largest frame of a framed NAR kiln accepts; Nix sends 32 KiB frames. */
const MAX_FRAME = 8 << 20;

export interface DaemonSessionDeps extends CachePathsDeps {
  /** BuildPaths of derivations and BuildDerivation: direct builds in kiln's farm */
  farm: FarmBuilds;
}

/** The channel's output with backpressure: resolves when the bytes may be followed by more. */
export interface SessionOutput {
  write(bytes: Buffer): Promise<void>;
}

/**
 * Serves the session until the client closes it or breaks the protocol. `store` is null when the
 * user name names no cache this login may see: the client is told so at the greeting.
 */
export async function serveDaemonSession(
  deps: DaemonSessionDeps, store: SessionStore | null, input: AsyncIterable<Uint8Array>, out: SessionOutput, refusal: string,
  /** marks the connection busy while a build is waited for (ssh.idleTimeoutSecs); returns the release */
  hold: () => () => void = () => () => undefined,
): Promise<void> {
  const from = new WireReader(input);
  if ((await from.u64()) !== WORKER_MAGIC_1) throw new WireError('protocol mismatch: the client did not greet with the worker magic');
  await out.write(Buffer.concat([wireU64(WORKER_MAGIC_2), wireU64(PROTOCOL_VERSION)]));
  const clientVersion = await from.u64();
  if (clientVersion >> 8 !== 1 || (clientVersion & 0xff) < 10) throw new WireError(`client protocol version ${clientVersion >> 8}.${clientVersion & 0xff} is not supported`);
  const minor = Math.min(clientVersion & 0xff, DAEMON_PROTOCOL_MINOR);
  if (minor >= 14 && (await from.bool())) await from.u64(); // obsolete CPU affinity
  if (minor >= 11) await from.u64(); // obsolete reserveSpace
  if (store === null) {
    await out.write(wireDaemonError(refusal, minor));
    return;
  }
  await out.write(wireU64(STDERR_LAST));

  const cache = cachePaths(deps, store);
  const readable = (what: string) => cache.demandRead(what);
  const knows = () => cache.demandMembership();
  const infoOf = (path: string) => cache.info(path);
  const last = () => out.write(wireU64(STDERR_LAST));
  const logLine = (line: string) => out.write(Buffer.concat([wireU64(STDERR_NEXT), wireString(`${line}\n`)]));
  /** A farm build of `drvPath`, the connection held busy while it runs. */
  const farmBuild = async (drvPath: string) => {
    const release = hold();
    try {
      return await deps.farm.build(store, cache, drvPath, logLine);
    } finally {
      release();
    }
  };

  for (;;) {
    if (await from.atEnd()) return;
    const code = await from.u64();
    try {
      switch (code) {
        case op.isValidPath: {
          const path = await from.string();
          knows();
          const info = await infoOf(path);
          await last();
          await out.write(wireU64(info === null ? 0 : 1));
          break;
        }
        case op.queryValidPaths: {
          const paths = await from.strings();
          if (minor >= 27) await from.u64(); // substitute: kiln's caches do not substitute
          knows();
          const valid: string[] = [];
          for (const path of paths) if ((await infoOf(path)) !== null) valid.push(path);
          await last();
          await out.write(wireStrings(valid));
          break;
        }
        case op.queryPathInfo: {
          const path = await from.string();
          readable('QueryPathInfo');
          const info = await infoOf(path);
          await last();
          if (info === null) {
            if (minor < 17) throw new StoreRefusal(`path '${path}' is not valid`);
            await out.write(wireU64(0));
          } else await out.write(Buffer.concat([...(minor >= 17 ? [wireU64(1)] : []), pathInfoWire(info, minor)]));
          break;
        }
        case op.queryPathFromHashPart: {
          const hashPart = await from.string();
          readable('QueryPathFromHashPart');
          const info = await cache.byHashPart(hashPart);
          await last();
          await out.write(wireString(info?.storePath ?? ''));
          break;
        }
        case op.narFromPath: {
          const path = await from.string();
          readable('NarFromPath');
          const nar = await cache.nar(path);
          await last();
          // The client parses the NAR to find its end; past STDERR_LAST no error can be sent.
          for await (const chunk of nar) await out.write(Buffer.from(chunk));
          break;
        }
        case op.addToStoreNar:
          await addToStoreNar(cache, from, minor, last);
          break;
        case op.addMultipleToStore:
          await addMultipleToStore(cache, from, last);
          break;
        case op.buildPaths: {
          // `nix copy --from` realises its store paths in the source store first: for paths the
          // cache holds that is nothing to do. A derivation (`drv!out`) is built in the farm.
          const targets = await from.strings();
          if (minor >= 15) await from.u64(); // build mode
          readable('BuildPaths');
          for (const target of targets) {
            const bang = target.indexOf('!');
            if (bang < 0) {
              if ((await infoOf(target)) === null) throw new StoreRefusal(`path '${target}' is not in cache "${store.cache.name}"`);
              continue;
            }
            const outcome = await farmBuild(target.slice(0, bang));
            if (!outcome.ok) throw new StoreRefusal(outcome.message);
          }
          await last();
          await out.write(wireU64(1));
          break;
        }
        case op.buildDerivation: {
          const drvPath = await from.string();
          const claimed = await readBasicDerivationOutputs(from);
          await from.u64(); // build mode
          const failure = buildDerivationFailure(await farmBuild(drvPath), claimed, drvPath, store.cache.name);
          await last();
          const result = [wireU64(failure === '' ? BUILT : MISC_FAILURE), wireString(failure)];
          if (minor >= 29) result.push(wireU64(1), wireU64(0), wireU64(0), wireU64(0)); // timesBuilt, isNonDeterministic, start and stop time
          if (minor >= 28) result.push(wireU64(0)); // builtOutputs: only content-addressed derivations need them
          await out.write(Buffer.concat(result));
          break;
        }
        case op.queryMissing: {
          const targets = await from.strings();
          knows();
          // A cache builds nothing and substitutes nothing: what it lacks is unknown to it.
          const unknown: string[] = [];
          for (const target of targets) {
            const path = target.split('!')[0]!;
            if (target.includes('!') || (await infoOf(path)) === null) unknown.push(path);
          }
          await last();
          await out.write(Buffer.concat([wireStrings([]), wireStrings([]), wireStrings(unknown), wireU64(0), wireU64(0)]));
          break;
        }
        case op.setOptions: {
          for (let i = 0; i < 12; i++) await from.u64();
          if (minor >= 12) {
            const n = await from.u64();
            if (n > 10_000) throw new WireError(`${n} settings overrides`);
            for (let i = 0; i < n; i++) {
              await from.string();
              await from.string();
            }
          }
          // The client's settings concern a local store's builds; a cache has none to apply them to.
          await last();
          break;
        }
        case op.addTempRoot: {
          await from.string();
          await last();
          await out.write(wireU64(1));
          break;
        }
        default:
          await out.write(wireDaemonError(`kiln's daemon protocol does not support operation ${code}`, minor));
          return;
      }
    } catch (e) {
      if (e instanceof StoreRefusal || e instanceof ApiError) await out.write(wireDaemonError(e.message, minor));
      else if (e instanceof SessionEnds) {
        await out.write(wireDaemonError(e.message, minor));
        return;
      } else throw e;
    }
  }
}

/** ValidPathInfo::write without the path (path-info.cc): what QueryPathInfo answers. */
function pathInfoWire(info: Narinfo, minor: number): Buffer {
  const hash = parseHash(info.narHash, 'sha256');
  const narHash = hash.ok ? formatHash(hash.value, 'base16', false) : '';
  const full = (base: string) => `${DEFAULT_STORE_DIR}/${base}`;
  const parts = [
    wireString(info.deriver ? full(info.deriver) : ''),
    wireString(narHash),
    wireStrings(info.references.map(full).sort()),
    wireU64(0), // registration time: the cache's copy has none Nix needs
    wireU64(info.narSize),
  ];
  if (minor >= 16) parts.push(wireU64(0), wireStrings(info.sigs), wireString(info.ca ?? ''));
  return Buffer.concat(parts);
}

/**
 * AddToStoreNar: the path's info, then (1.23+) its NAR as a framed stream. A refusal decided
 * before the NAR is read drains the frames first, as Nix's FramedSource does, so the session
 * stays in step; a client that goes away mid-NAR leaves nothing behind (cachePaths.ts).
 */
async function addToStoreNar(cache: CachePaths, from: WireReader, minor: number, last: () => Promise<void>): Promise<void> {
  const info = await readImportedPathInfo(from);
  await from.u64(); // repair
  await from.u64(); // dontCheckSigs
  if (minor < 23) throw new WireError('AddToStoreNar before protocol 1.23 is not supported');
  const frames = from.frames(MAX_FRAME);
  await cache.add(info, frames, async () => {
    for await (const chunk of frames) void chunk;
  });
  await last();
}

/**
 * AddMultipleToStore (1.32+, daemon.cc and Store::addMultipleToStore): one framed stream holding
 * a count, then per path its info (as AddToStoreNar's) and its NAR of NarSize bytes, unframed
 * within the stream. Each path passes the same checks as AddToStoreNar; a refusal drains the rest
 * of the stream so the session stays in step and the client is told, and the paths before it stay
 * stored (as with a real daemon).
 *
 * Batched (docs/ssh.md): a path's NAR is read off the stream, then checked and compressed under
 * its upload permit (up to INGESTS_IN_FLIGHT at once) while the next NARs are read; the prepared
 * paths are committed BATCH_PATHS at a time, one database transaction and one events transaction
 * per batch, while the stream is read on. The client is answered after the last commit.
 */
async function addMultipleToStore(cache: CachePaths, from: WireReader, last: () => Promise<void>): Promise<void> {
  await from.u64(); // repair
  await from.u64(); // dontCheckSigs: the cache signs with its own key
  const frames = from.frames(MAX_FRAME);
  const stream = new WireReader(frames);
  const drainStream = async () => {
    for await (const chunk of frames) void chunk;
  };
  const inFlight = new Set<Promise<unknown>>();
  let failure: { error: unknown } | null = null;
  const fail = (error: unknown) => {
    failure ??= { error };
  };
  let batch: Promise<PreparedIngest | null>[] = [];
  let batchBytes = 0;
  // One commit at a time, in stream order; the next batch fills meanwhile.
  let committing: Promise<void> = Promise.resolve();
  const flush = async () => {
    const preparing = batch;
    batch = [];
    batchBytes = 0;
    await committing;
    committing = (async () => {
      const prepared = (await Promise.all(preparing)).filter((p): p is PreparedIngest => p !== null);
      const errors = await cache.commit(prepared).catch(async (error: unknown) => {
        await Promise.all(prepared.map((p) => cache.discard(p)));
        return [error];
      });
      for (const error of errors) if (error !== null) fail(error);
    })();
  };
  try {
    const count = await stream.u64();
    for (let i = 0; i < count && failure === null; i++) {
      const info = await readImportedPathInfo(stream);
      if (info.narSize === 0) throw new SessionEnds(`${info.path}: a path without its NarSize cannot be read from an AddMultipleToStore stream`);
      let consumed!: () => void;
      const read = new Promise<void>((resolve) => (consumed = resolve));
      const nar = (async function* () {
        try {
          yield* stream.exactly(info.narSize);
        } finally {
          consumed();
        }
      })();
      const preparing: Promise<PreparedIngest | null> = cache.prepare(info, nar, async () => {
        for await (const chunk of nar) void chunk;
      }).catch((error: unknown) => {
        fail(error);
        return null;
      }).finally(() => {
        inFlight.delete(preparing);
        consumed(); // refused before its NAR was read: the session ends, nothing more is read
      });
      inFlight.add(preparing);
      batch.push(preparing);
      batchBytes += info.narSize;
      await read;
      while (inFlight.size >= INGESTS_IN_FLIGHT) await Promise.race(inFlight);
      if (batch.length >= BATCH_PATHS || batchBytes >= BATCH_BYTES) await flush();
    }
    await flush();
    await committing;
    if (failure === null && !(await stream.atEnd())) throw new WireError('AddMultipleToStore: bytes after the last path');
  } catch (e) {
    // What was read whole is committed, as the paths before a refusal are.
    await flush().catch(() => undefined);
    await committing;
    fail(e);
  }
  // (set in callbacks, which the compiler does not follow)
  const ended = failure as { error: unknown } | null;
  if (ended !== null) {
    const { error } = ended;
    if (error instanceof StoreRefusal || error instanceof ApiError) await drainStream();
    throw error;
  }
  await last();
}
