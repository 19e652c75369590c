// A cache as the SSH sessions see it, shared by the daemon (ssh-ng) and serve (ssh) protocols:
// a path's narinfo as the cache serves it, its NAR decompressed, and adding a path through the
// ingest front door (services/caches/narIngest.ts), staged whole before it is ingested.
import { createHash } from 'node:crypto';
import {
  ApiError,
  decompressNar,
  DEFAULT_STORE_DIR,
  formatHash,
  parseHash,
  parseNarinfo,
  parseContentAddress,
  parseNarUrl,
  parseStorePath,
  type ExportTrailer,
  type Narinfo,
} from '../../protocol/index.js';
import type { Principal } from '../access/index.js';
import { UploadBusy, type IngestTarget, type NarIngest } from '../caches/index.js';
import type { NarStorage, PreparedIngest } from '../../storage/index.js';
import type { NarLeases } from './narLeases.js';
import { SessionEnds, StoreRefusal } from './sessionErrors.js';

/** What the SSH login may do in the cache its user name selected. */
export interface SessionStore {
  /** the login */
  who: Principal;
  /** the project builds go into, when the session's command names one (`nix-daemon --project ORG/PROJECT`) */
  project: string | null;
  cache: { id: string; name: string };
  canRead: boolean;
  /** where added paths are ingested; null without writeStore on the cache */
  writeTarget: IngestTarget | null;
}

export interface CachePathsDeps {
  nars: NarStorage;
  ingest: NarIngest;
  /** nar.maxUploadSize: a larger claimed NarSize ends the session before a permit is asked for */
  maxUploadSize: number;
  /** upload.leaseIdleSecs: a NAR that stalls while its permit is held ends the session */
  leases: NarLeases;
}

/** A path's info as the client sent it (ValidPathInfo fields), before kiln checks it. */
export interface ClientPathInfo {
  path: string;
  deriver: string;
  /** any spelling Nix writes: base16 without prefix, `sha256:<nix32>` */
  narHash: string;
  references: string[];
  narSize: number;
  ca: string;
}

/**
 * A batch's NAR up to this size is read into memory and ingested from there, not staged to a
 * temporary file and read back (bench/README.md, ssh-copy). At most INGESTS_IN_FLIGHT of them are
 * held at once (daemonSession.ts); a prepared path keeps only its zstd file.
 */
const IN_MEMORY_NAR_BYTES = 1024 * 1024;

async function* once(bytes: Uint8Array): AsyncGenerator<Uint8Array> {
  yield bytes;
}

const baseName = (path: string, field: string): string => {
  const parsed = parseStorePath(path, DEFAULT_STORE_DIR, field);
  if (!parsed.ok) throw new StoreRefusal(`${field}: "${path}" is not a store path`);
  return `${parsed.value.hashPart}-${parsed.value.name}`;
};

export function cachePaths(deps: CachePathsDeps, store: SessionStore) {
  /** The narinfo kiln would store for the client's info, or a refusal (after draining the NAR, unless the session ends). */
  const admissible = async (client: ClientPathInfo, drain: () => Promise<void>): Promise<{ target: IngestTarget; info: Narinfo }> => {
    try {
      if (store.writeTarget === null) throw new StoreRefusal(`you may not write to cache "${store.cache.name}" (it needs the writeStore permission)`);
      // Refused on the claim, before an upload permit is waited for: a huge claim would hold
      // every other tenant's uploads behind it. Draining that much is no better: the session ends.
      if (client.narSize > deps.maxUploadSize) {
        throw new SessionEnds(`the NAR of ${client.path} has ${client.narSize} bytes, more than nar.maxUploadSize (${deps.maxUploadSize})`);
      }
      const narHash = parseHash(client.narHash, 'sha256', 'narHash');
      if (!narHash.ok) throw new StoreRefusal(`narHash: ${narHash.reason}`);
      // Checked as a narinfo's CA line is: the value goes into a narinfo the cache signs.
      const ca = client.ca === '' ? null : parseContentAddress(client.ca);
      if (ca !== null && !ca.ok) throw new StoreRefusal(`ca: ${ca.reason}`);
      return {
        target: store.writeTarget,
        info: {
          storePath: `${DEFAULT_STORE_DIR}/${baseName(client.path, 'path')}`,
          url: '',
          compression: 'none',
          narHash: formatHash(narHash.value),
          narSize: client.narSize,
          references: client.references.map((r) => baseName(r, 'references')),
          ...(client.deriver === '' ? {} : { deriver: baseName(client.deriver, 'deriver') }),
          // the client's signatures are not kept: the cache signs with its own key
          sigs: [],
          ...(ca === null ? {} : { ca: ca.value }),
        },
      };
    } catch (e) {
      if (!(e instanceof SessionEnds)) await drain();
      throw e;
    }
  };

  /** Refuses a path the cache has no room for (after draining its NAR); true when the cache holds it already. */
  const roomFor = async (target: IngestTarget, info: Narinfo, drain: () => Promise<void>): Promise<boolean> => {
    const held = await deps.ingest.demandRoomFor(target, info).catch(async (e: unknown) => {
      await drain();
      throw e;
    });
    return held !== null;
  };

  /** Stages the whole NAR to a temporary file for `work`, then forgets the file; `nar` is leased unless it is already. */
  const staged = async <T>(nar: AsyncIterable<Uint8Array>, work: (file: string) => Promise<T>, leased = false): Promise<T> => {
    let whole = false;
    const counted = (async function* () {
      yield* leased ? nar : deps.leases.leased(nar);
      whole = true;
    })();
    let file: string;
    try {
      file = await deps.ingest.stage(counted);
    } catch (e) {
      // Refused part-way (nar.maxUploadSize): the rest of the NAR is still on the wire.
      if (!whole && e instanceof ApiError) throw new SessionEnds(e.message);
      throw e;
    }
    try {
      return await work(file);
    } finally {
      await deps.ingest.forget(file);
    }
  };

  /**
   * `nar`'s chunks, ending the session at the first byte past its announced NarSize: a NAR is
   * read under a permit for NarSize bytes, so a framed stream longer than its claim would stage
   * bytes no permit counts (AddToStoreNar's frames end where the client says, not at NarSize).
   */
  const announced = async function* (nar: AsyncIterable<Uint8Array>, narSize: number): AsyncGenerator<Uint8Array> {
    let bytes = 0;
    for await (const chunk of nar) {
      bytes += chunk.byteLength;
      if (bytes > narSize) throw new SessionEnds(`the NAR is longer than its announced ${narSize} bytes`);
      yield chunk;
    }
  };

  /** The whole NAR read into memory (a small one, within its lease), for the ingest without a staged file. */
  const inMemory = async (nar: AsyncIterable<Uint8Array>, narSize: number): Promise<Uint8Array> => {
    const chunks: Uint8Array[] = [];
    let bytes = 0;
    for await (const chunk of deps.leases.leased(announced(nar, narSize))) {
      bytes += chunk.byteLength;
      chunks.push(chunk);
    }
    return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, bytes);
  };

  /**
   * NarSize of this session's prepared paths not yet committed (an AddMultipleToStore batch): a
   * path's storage-limit check counts them, which the committed usage does not yet, so a stream
   * cannot overshoot its cache's limit by the batches it has in flight (docs/ssh.md).
   */
  let uncommittedBytes = 0;
  const reserved = new Map<PreparedIngest, number>();
  const release = (prepared: PreparedIngest) => {
    uncommittedBytes -= reserved.get(prepared) ?? 0;
    reserved.delete(prepared);
  };

  const self = {
    /** Refuses reading a private cache without viewCache. */
    demandRead(what: string): void {
      if (!store.canRead) throw new StoreRefusal(`${what}: you may not read cache "${store.cache.name}" (it needs the viewCache permission)`);
    },

    /** Which paths the cache holds: readers and writers (a writer skips what is there) may ask. */
    demandMembership(): void {
      if (!store.canRead && store.writeTarget === null) throw new StoreRefusal(`you may not read cache "${store.cache.name}"`);
    },

    /** The narinfo of `path` in the cache, or null. */
    async info(path: string): Promise<Narinfo | null> {
      const parsed = parseStorePath(path, DEFAULT_STORE_DIR);
      if (!parsed.ok) throw new StoreRefusal(`"${path}" is not a store path`);
      const text = await deps.nars.reads.narinfo(store.cache.id, parsed.value.hashPart);
      if (text === null) return null;
      const info = parseNarinfo(text.toString('utf8'));
      return info.ok && info.value.storePath === path ? info.value : null;
    },

    /** The narinfo of the path whose hash part is `hashPart`, or null. */
    async byHashPart(hashPart: string): Promise<Narinfo | null> {
      if (!/^[0-9a-df-np-sv-z]{32}$/.test(hashPart)) return null;
      const text = await deps.nars.reads.narinfo(store.cache.id, hashPart);
      const info = text === null ? null : parseNarinfo(text.toString('utf8'));
      return info?.ok ? info.value : null;
    },

    /** The uncompressed NAR of `path`; a refusal when the cache does not hold it (decided before any byte). */
    async nar(path: string): Promise<AsyncIterable<Uint8Array>> {
      const info = await self.info(path);
      const fileHash = info === null ? undefined : parseNarUrl(info.url);
      const blob = fileHash === undefined ? null : await deps.nars.reads.openNar(fileHash);
      if (blob === null) throw new StoreRefusal(`path '${path}' is not valid in cache "${store.cache.name}"`);
      return decompressNar(blob.body, 'zstd');
    },

    /**
     * Adds a path whose NAR is `nar` (read to its end here). `nar` yields its last chunk only when
     * the client sent the whole NAR; `drain` reads and drops what is left of it, for refusals
     * decided before the NAR is read. Nothing is stored unless the whole NAR arrived and checked.
     */
    async add(client: ClientPathInfo, nar: AsyncIterable<Uint8Array>, drain: () => Promise<void>): Promise<void> {
      const { target, info } = await admissible(client, drain);
      const held = await roomFor(target, info, drain);
      if (held) return drain();
      await deps.ingest.admitted(info.narSize, 'wait', target.owner, () =>
        staged(announced(nar, info.narSize), async (file) => {
          await deps.ingest.ingest(target, info, { file });
        }));
    },

    /**
     * Adds a path sent in Nix's export format (the serve protocol's ImportPaths): its NAR first,
     * hashed as it arrives (the format sends no NarHash or NarSize: as `nix-store --import` does,
     * they are what arrived), then `trailer` read: the path, references and deriver, checked and
     * ingested as AddToStoreNar's are. The size is unknown until the NAR ends, so its first
     * IN_MEMORY_NAR_BYTES are read into memory (as much as an SSH channel's window holds): a NAR
     * that ends there is ingested under a permit for its size; a longer one needs a permit for
     * nar.maxUploadSize, the most it may grow to, before any byte is staged to disk. That one is
     * waited for upload.restWaitSecs at most (the client holds its NAR mid-stream meanwhile);
     * none then ends the session, nothing stored: staged bytes are always within the server's
     * upload budget, however many sessions import at once.
     */
    async addExported(nar: AsyncIterable<Uint8Array>, trailer: () => Promise<ExportTrailer>): Promise<void> {
      if (store.writeTarget === null) throw new StoreRefusal(`you may not write to cache "${store.cache.name}" (it needs the writeStore permission)`);
      const owner = store.writeTarget.owner;
      const hash = createHash('sha256');
      let narSize = 0;
      const chunks = deps.leases.leased(nar)[Symbol.asyncIterator]();
      const head: Uint8Array[] = [];
      let ended = false;
      while (narSize <= IN_MEMORY_NAR_BYTES) {
        const next = await chunks.next();
        if (next.done === true) {
          ended = true;
          break;
        }
        hash.update(next.value);
        narSize += next.value.byteLength;
        head.push(next.value);
      }
      const ingest = async (file: string) => {
        const { path, references, deriver } = await trailer();
        const client: ClientPathInfo = { path, deriver, narHash: hash.digest('hex'), references, narSize, ca: '' };
        const { target, info } = await admissible(client, async () => undefined);
        if (await roomFor(target, info, async () => undefined)) return;
        await deps.ingest.ingest(target, info, { file });
      };
      if (ended) {
        await deps.ingest.admitted(narSize, 'wait', owner, () => staged(once(Buffer.concat(head, narSize)), ingest));
        return;
      }
      const rest = (async function* () {
        yield* head;
        for (;;) {
          const next = await chunks.next();
          if (next.done === true) return;
          hash.update(next.value);
          narSize += next.value.byteLength;
          yield next.value;
        }
      })();
      try {
        await deps.ingest.admitted(deps.maxUploadSize, 'rest', owner, () => staged(rest, ingest, true));
      } catch (e: unknown) {
        // The rest of the NAR is still on the wire.
        if (e instanceof UploadBusy) throw new SessionEnds(`${e.message} (an imported NAR over ${IN_MEMORY_NAR_BYTES} bytes needs a permit for nar.maxUploadSize)`);
        throw e;
      } finally {
        // Refused or failed before the NAR's end, the leased read is left suspended past its head:
        // ended here, or its lease stays in NarLeases for good (it awaits no chunk, so no sweep
        // ends it). Not awaited: a read still pending ends with the session or the lease.
        void chunks.return?.(undefined).catch(() => undefined);
      }
    },

    /**
     * add's first half, for a batch of paths (AddMultipleToStore): the NAR read, checked and
     * compressed under its upload permit, not yet committed; null when the cache holds the path
     * already. Committed by commit(), which gives each path's outcome.
     */
    async prepare(client: ClientPathInfo, nar: AsyncIterable<Uint8Array>, drain: () => Promise<void>): Promise<PreparedIngest | null> {
      const { target, info } = await admissible(client, drain);
      // The NAR is read off the stream before the room and held checks, so the stream never waits
      // for their queries (a batch's paths would otherwise be read one query round trip apart).
      const ready = async (source: { file: string } | { bytes: Uint8Array }) => {
        if (await roomFor(target, info, async () => undefined)) return null;
        // reserved before the next await, so the paths prepared side by side see each other
        const ahead = uncommittedBytes;
        uncommittedBytes += info.narSize;
        try {
          if (ahead > 0) await deps.ingest.demandRoom(target, ahead + info.narSize);
          const prepared = await deps.ingest.prepare(target, info, source);
          reserved.set(prepared, info.narSize);
          return prepared;
        } catch (e) {
          uncommittedBytes -= info.narSize;
          throw e;
        }
      };
      return deps.ingest.admitted(info.narSize, 'wait', target.owner, async () =>
        info.narSize <= IN_MEMORY_NAR_BYTES ? ready({ bytes: await inMemory(nar, info.narSize) }) : staged(announced(nar, info.narSize), (file) => ready({ file })));
    },

    /** Commits prepared paths together (narIngest.ts, commitMany): each one's error, or null. */
    async commit(prepared: readonly PreparedIngest[]): Promise<unknown[]> {
      if (store.writeTarget === null || prepared.length === 0) return [];
      try {
        const results = await deps.ingest.commitMany(store.writeTarget, prepared);
        return results.map((r) => (r.status === 'rejected' ? r.reason : null));
      } finally {
        // committed now, or refused: either way the committed usage says what they take
        for (const p of prepared) release(p);
      }
    },

    /** Throws a prepared path away (its session ended before the commit). */
    discard: (prepared: PreparedIngest) => {
      release(prepared);
      return deps.ingest.discard(prepared);
    },
  };
  return self;
}

export type CachePaths = ReturnType<typeof cachePaths>;
