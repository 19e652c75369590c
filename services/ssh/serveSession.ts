// One `nix-store --serve --write` session over SSH (`ssh://CACHE@kiln`): Nix's legacy serve
// protocol (serve-protocol.hh; nix-store.cc opServe is the server, legacy-ssh-store.cc the
// client) answered from one kiln cache. The protocol has no error message on the wire: like
// `nix-store --serve`, kiln writes the error to the session's stderr and ends it.
import { EXPORT_MAGIC, exportedNar, nextExportedPath, readExportTrailer, readImportedPathInfo, WireError, WireReader, wireString, wireStrings, wireU64 } from '../../protocol/index.js';
import { cachePaths, type SessionStore } from './cachePaths.js';
import { buildDerivationFailure, readBasicDerivationOutputs } from './farmBuilds.js';
import { StoreRefusal } from './sessionErrors.js';
import type { DaemonSessionDeps, SessionOutput } from './daemonSession.js';

const SERVE_MAGIC_1 = 0x390c9deb;
const SERVE_MAGIC_2 = 0x5452eecb;
/** 2.7: from 2.5 Nix adds paths with AddToStoreNar (a sized NAR); ImportPaths stays for older clients and Hydra. */
const SERVE_PROTOCOL_MINOR = 7;

const cmd = {
  queryValidPaths: 1,
  queryPathInfos: 2,
  dumpStorePath: 3,
  importPaths: 4,
  exportPaths: 5,
  buildPaths: 6,
  queryClosure: 7,
  buildDerivation: 8,
  addToStoreNar: 9,
} as const;

/** BuildResult::Status PermanentFailure: what BuildPaths answers for what kiln cannot give. */
const PERMANENT_FAILURE = 3;
/** BuildResult::Status values of BuildDerivation. */
const BUILT = 0;
const MISC_FAILURE = 9;

/** Serves the session; throws StoreRefusal or WireError with what the client should be told on stderr. */
export async function serveLegacySession(
  deps: DaemonSessionDeps, store: SessionStore | null, writeFlag: boolean, input: AsyncIterable<Uint8Array>, out: SessionOutput, refusal: string,
  /** the session's stderr: where the serve protocol's clients read a build's log */
  stderr: (text: string) => void = () => undefined,
  /** marks the connection busy while a build is waited for (ssh.idleTimeoutSecs); returns the release */
  hold: () => () => void = () => () => undefined,
): Promise<void> {
  const from = new WireReader(input);
  if ((await from.u64()) !== SERVE_MAGIC_1) throw new WireError('protocol mismatch: the client did not greet with the serve magic');
  await out.write(Buffer.concat([wireU64(SERVE_MAGIC_2), wireU64((2 << 8) | SERVE_PROTOCOL_MINOR)]));
  const clientVersion = await from.u64();
  const minor = Math.min(clientVersion & 0xff, SERVE_PROTOCOL_MINOR);
  if (clientVersion >> 8 !== 2 || minor < 4) throw new WireError('serve protocol before 2.4 is not supported');
  if (store === null) throw new StoreRefusal(refusal);
  const cache = cachePaths(deps, store);
  /** A farm build of `drvPath` (farmBuilds.ts), its log on stderr, the connection held busy meanwhile. */
  const farmBuild = async (drvPath: string) => {
    const release = hold();
    try {
      return await deps.farm.build(store, cache, drvPath, async (line) => stderr(`${line}\n`));
    } finally {
      release();
    }
  };

  const readBuildSettings = async () => {
    await from.u64(); // maxSilentTime
    await from.u64(); // buildTimeout
    if (minor >= 2) await from.u64(); // maxLogSize
    if (minor >= 3) {
      await from.u64(); // buildRepeat
      await from.u64(); // enforceDeterminism
    }
    if (minor >= 7) await from.u64(); // keepFailed
  };

  for (;;) {
    if (await from.atEnd()) return;
    const code = await from.u64();
    switch (code) {
      case cmd.queryValidPaths: {
        await from.u64(); // lock
        await from.u64(); // substitute
        const paths = await from.strings();
        cache.demandMembership();
        const valid: string[] = [];
        for (const path of paths) if ((await cache.info(path)) !== null) valid.push(path);
        await out.write(wireStrings(valid));
        break;
      }
      case cmd.queryPathInfos: {
        const paths = await from.strings();
        cache.demandRead('QueryPathInfos');
        const parts: Buffer[] = [];
        for (const path of paths) {
          const info = await cache.info(path);
          if (info === null) continue;
          const full = (base: string) => `/nix/store/${base}`;
          parts.push(
            wireString(info.storePath), wireString(info.deriver ? full(info.deriver) : ''), wireStrings(info.references.map(full).sort()),
            wireU64(info.narSize), wireU64(info.narSize), wireString(info.narHash), wireString(info.ca ?? ''), wireStrings(info.sigs),
          );
        }
        parts.push(wireString(''));
        await out.write(Buffer.concat(parts));
        break;
      }
      case cmd.dumpStorePath: {
        const path = await from.string();
        cache.demandRead('DumpStorePath');
        for await (const chunk of await cache.nar(path)) await out.write(Buffer.from(chunk));
        break;
      }
      case cmd.exportPaths: {
        await from.u64(); // obsolete
        const paths = await from.strings();
        cache.demandRead('ExportPaths');
        // Nix's export format: per path 1, the NAR, the trailer (magic, path, references, deriver, no signature); then 0.
        for (const path of paths) {
          const info = await cache.info(path);
          if (info === null) throw new StoreRefusal(`path '${path}' is not valid in cache "${store.cache.name}"`);
          await out.write(wireU64(1));
          for await (const chunk of await cache.nar(path)) await out.write(Buffer.from(chunk));
          const full = (base: string) => `/nix/store/${base}`;
          await out.write(Buffer.concat([
            wireU64(EXPORT_MAGIC), wireString(info.storePath), wireStrings(info.references.map(full).sort()),
            wireString(info.deriver ? full(info.deriver) : ''), wireU64(0),
          ]));
        }
        await out.write(wireU64(0));
        break;
      }
      case cmd.buildPaths: {
        const targets = await from.strings();
        await readBuildSettings();
        if (!writeFlag) throw new StoreRefusal('building paths is not allowed');
        cache.demandRead('BuildPaths');
        // `nix copy --from` realises its paths in the source store first: for paths the cache holds
        // that is nothing to do. A derivation (`drv!out`) is built in the farm.
        let problem: string | null = null;
        for (const target of targets) {
          const bang = target.indexOf('!');
          if (bang >= 0) {
            const outcome = await farmBuild(target.slice(0, bang)).catch((e: unknown) => {
              if (e instanceof StoreRefusal) return { ok: false, message: e.message };
              throw e;
            });
            if (!outcome.ok) problem = outcome.message;
          } else if ((await cache.info(target)) === null) problem = `path '${target}' is not in cache "${store.cache.name}"`;
          if (problem !== null) break;
        }
        await out.write(problem === null ? wireU64(0) : Buffer.concat([wireU64(PERMANENT_FAILURE), wireString(problem)]));
        break;
      }
      case cmd.buildDerivation: {
        const drvPath = await from.string();
        const claimed = await readBasicDerivationOutputs(from);
        await readBuildSettings();
        if (!writeFlag) throw new StoreRefusal('building paths is not allowed');
        // A refusal is the build's failure here: the client shows it as the reason the build failed.
        const failure = await farmBuild(drvPath).then(
          (outcome) => buildDerivationFailure(outcome, claimed, drvPath, store.cache.name),
          (e: unknown) => {
            if (e instanceof StoreRefusal) return e.message;
            throw e;
          },
        );
        const result = [wireU64(failure === '' ? BUILT : MISC_FAILURE), wireString(failure)];
        if (minor >= 3) result.push(wireU64(1), wireU64(0), wireU64(0), wireU64(0)); // timesBuilt, isNonDeterministic, start and stop time
        if (minor >= 6) result.push(wireU64(0)); // builtOutputs: only content-addressed derivations need them
        await out.write(Buffer.concat(result));
        break;
      }
      case cmd.queryClosure: {
        await from.u64(); // includeOutputs: a cache keeps no derivation outputs apart from paths
        const roots = await from.strings();
        cache.demandRead('QueryClosure');
        const seen = new Set<string>();
        const queue = [...roots];
        while (queue.length > 0) {
          const path = queue.pop()!;
          if (seen.has(path)) continue;
          const info = await cache.info(path);
          if (info === null) continue;
          seen.add(path);
          for (const ref of info.references) queue.push(`/nix/store/${ref}`);
        }
        await out.write(wireStrings([...seen].sort()));
        break;
      }
      case cmd.importPaths: {
        if (!writeFlag) throw new StoreRefusal('importing paths is not allowed');
        // Nix's export format, path after path (exportWire.ts); each one stored as it is read.
        while (await nextExportedPath(from)) await cache.addExported(exportedNar(from, deps.maxUploadSize), () => readExportTrailer(from));
        await out.write(wireU64(1));
        break;
      }
      case cmd.addToStoreNar: {
        if (!writeFlag) throw new StoreRefusal('importing paths is not allowed');
        const info = await readImportedPathInfo(from);
        const { narSize } = info;
        if (narSize === 0) throw new StoreRefusal('narInfo is too old and missing the narSize field');
        // The NAR follows unframed: exactly narSize bytes.
        const sized = from.exactly(narSize);
        await cache.add(info, sized, async () => {
          for await (const chunk of sized) void chunk;
        });
        await out.write(wireU64(1));
        break;
      }
      default:
        throw new StoreRefusal(`kiln's serve protocol does not support command ${code}`);
    }
  }
}
