// Upstream caches at request time: a narinfo the cache does not hold is asked of
// its upstreams in priority order (at most cache.upstreamQueryConcurrency queries at once in this
// process), and the first one with a valid signature by that upstream's key is served, re-signed
// (upstreamNarinfo.ts) and with X-Cache: MISS; its NAR is proxied through kiln; build logs and
// debug info fall back to the upstreams too. Answers are remembered briefly, so a client asking
// for hundreds of missing paths does not send hundreds of requests upstream twice.
import { createReadStream } from 'node:fs';
import { rm, stat } from 'node:fs/promises';
import type { Sql } from 'postgres';
import type { Logger } from '../../config/index.js';
import { isStorePathHashPart, VerifyingKey } from '../../protocol/index.js';
import { TtlMap, type EventBus, type SecretBox } from '../../storage/index.js';
import { onCacheChanged } from './cacheChanges.js';
import { cacheSigningKeys } from './cacheSigningKeys.js';
import type { BinaryCache } from './binaryCacheAccess.js';
import { Semaphore } from './semaphore.js';
import {
  fetchSmallBytes, fetchSmallText, headUpstreamFile, lazyUpstreamBody, spoolUpstreamFile, type ByteRange, type FetchFunction,
} from './upstreamFetch.js';
import { authorizationOf, openUpstreamCredentials } from './upstreamCredentials.js';
import { adoptUpstreamNarinfo, isProxiablePath, proxiedUrl, type UpstreamSource } from './upstreamNarinfo.js';
import { listUpstreamRows } from './upstreamRows.js';

/** How long this process trusts a cache's upstream list, and an upstream's answer. */
export const UPSTREAM_LIST_TTL_MS = 5_000;
export const UPSTREAM_HIT_TTL_MS = 60_000;
export const UPSTREAM_MISS_TTL_MS = 5_000;
const NARINFO_MAX_BYTES = 64 * 1024;
const LOG_MAX_BYTES = 64 * 1024 * 1024;
const REMEMBERED_MAX = 20_000;

export interface UpstreamDeps {
  sql: Sql;
  log: Logger;
  /** cache.upstreamQueryConcurrency */
  concurrency: number;
  /** nar.maxUploadSize: the most a spooled NAR file may have */
  maxNarBytes: number;
  /** opens the credentials of private upstreams and the cache's signing key */
  secretBox: SecretBox;
  /** a fresh temporary file name under <baseDir>/staging (StagingArea.tempFile) */
  tempFile(suffix: string): string;
  /** deadline for an upstream's response head (default 10 s) */
  timeoutMs?: number;
  /** how upstreams are fetched: outboundFetch over the instance's outbound client */
  fetch: FetchFunction;
  /** where cache.changed arrives from this process and the others: an upstream list that changed is read again */
  bus: Pick<EventBus, 'subscribe'>;
  now?: () => number;
}

/** The cache a narinfo is asked for: the upstream answer is re-signed with its key. */
export type UpstreamCache = Pick<BinaryCache, 'id' | 'name'>;

/** A file an upstream has, ready to be served through kiln. */
export interface UpstreamFile {
  size: number;
  /** the bytes, or one inclusive range of them, fetched when first read */
  body(range: ByteRange | null): AsyncIterable<Uint8Array>;
}

export interface UpstreamBytes {
  body: Buffer;
  contentType: string | null;
  contentEncoding: string | null;
}

export interface Upstreams {
  /** The narinfo text to serve for a path the cache does not hold, or null when no upstream has it (validly signed). */
  lookupUpstreamNarinfo(cache: UpstreamCache, hashPart: string): Promise<Buffer | null>;
  /**
   * True when this process knows, without waiting, that the cache has no upstreams: a local miss
   * then answers 404 at once. False means "has some, or not known right now" (ask lookupUpstreamNarinfo).
   */
  knownToHaveNone(cacheId: string): boolean;
  /**
   * The NAR file a narinfo served from an upstream names (`upstream/<id>/<hash>/<path>`), or null.
   * Only a URL that the verified narinfo of `hashPart` names is fetched.
   */
  openUpstreamNar(cache: UpstreamCache, upstreamId: string, hashPart: string, path: string): Promise<UpstreamFile | null>;
  /** `log/<drv>` or `debuginfo/<build id>` from the first upstream that has it. */
  fetchUpstreamExtra(cacheId: string, path: string): Promise<UpstreamBytes | null>;
}

/** Changes after which a cache's upstream list and the answers of its upstreams are forgotten. */
const UPSTREAM_LIST_REASONS: ReadonlySet<string> = new Set(['upstream.put', 'upstream.delete', 'delete']);

interface KnownUpstream extends UpstreamSource {
  priority: number;
  /** fetch() as this upstream needs it: with its Authorization header when it has credentials */
  fetch: FetchFunction;
}

/**
 * fetch() that sends `authorization` with every request. On a redirect to another origin (an
 * upstream kiln on S3 answers NAR requests with a presigned URL) fetch drops the header itself.
 */
const authorizedFetch = (fetchFn: FetchFunction, authorization: string): FetchFunction =>
  (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set('Authorization', authorization);
    return fetchFn(input, { ...init, headers });
  };

export function createUpstreams(deps: UpstreamDeps): Upstreams {
  const fetchFn = deps.fetch;
  const now = deps.now ?? Date.now;
  const timeoutMs = deps.timeoutMs ?? 10_000;
  const queries = new Semaphore(deps.concurrency);
  const keys = cacheSigningKeys(deps.sql, deps.secretBox);
  const lists = new TtlMap<KnownUpstream[]>(REMEMBERED_MAX, now);
  const answers = new TtlMap<Buffer | null>(REMEMBERED_MAX, now);
  const inflight = new Map<string, Promise<Buffer | null>>();

  const loadingLists = new Map<string, Promise<KnownUpstream[]>>();
  onCacheChanged(deps.bus, UPSTREAM_LIST_REASONS, ({ cacheId }) => {
    if (cacheId === null) return;
    lists.delete(cacheId);
    loadingLists.delete(cacheId);
    answers.deletePrefix(`${cacheId}/`);
  });
  function upstreamsOf(cacheId: string): Promise<KnownUpstream[]> {
    const known = lists.get(cacheId);
    if (known !== undefined) return Promise.resolve(known);
    // One query per cache when the list expires, however many requests wait for it.
    const loading = loadingLists.get(cacheId);
    if (loading !== undefined) return loading;
    const started: Promise<KnownUpstream[]> = loadList(cacheId).finally(() => {
      if (loadingLists.get(cacheId) === started) loadingLists.delete(cacheId);
    });
    loadingLists.set(cacheId, started);
    return started;
  }

  async function loadList(cacheId: string): Promise<KnownUpstream[]> {
    const rows = await listUpstreamRows(deps.sql, cacheId);
    const list = rows.flatMap((row) => {
      const key = VerifyingKey.parse(row.public_key);
      if (!key.ok) {
        deps.log.warn({ upstream: row.url }, `upstream ${row.url} has an unreadable public key (${key.reason}); it is skipped`);
        return [];
      }
      let upstreamFetch = fetchFn;
      if (row.credentials !== null) {
        try {
          upstreamFetch = authorizedFetch(fetchFn, authorizationOf(openUpstreamCredentials(deps.secretBox, row.credentials)));
        } catch (err) {
          deps.log.warn({ err, upstream: row.url }, `the credentials of upstream ${row.url} cannot be opened (sealed with another crypt key?); it is skipped`);
          return [];
        }
      }
      return [{ id: row.id, url: row.url, key: key.value, priority: row.priority, fetch: upstreamFetch }];
    });
    lists.set(cacheId, list, UPSTREAM_LIST_TTL_MS);
    return list;
  }

  async function askUpstreams(cache: UpstreamCache, hashPart: string): Promise<Buffer | null> {
    for (const upstream of await upstreamsOf(cache.id)) {
      let body: string | null;
      try {
        body = await queries.run(() => fetchSmallText(upstream.fetch, `${upstream.url}/${hashPart}.narinfo`, NARINFO_MAX_BYTES, timeoutMs));
      } catch (err) {
        deps.log.warn({ err, upstream: upstream.url, cache: cache.name }, `upstream ${upstream.url} did not answer for ${hashPart}.narinfo; asking the next one`);
        continue;
      }
      if (body === null) continue;
      const adopted = adoptUpstreamNarinfo(body, hashPart, upstream, await keys.of(cache.id));
      if (adopted.ok) return Buffer.from(adopted.text);
      deps.log.warn({ upstream: upstream.url, cache: cache.name }, `upstream ${upstream.url} was not believed: ${adopted.reason}`);
    }
    return null;
  }

  async function lookupUpstreamNarinfo(cache: UpstreamCache, hashPart: string): Promise<Buffer | null> {
    const key = `${cache.id}/${hashPart}`;
    const known = answers.get(key);
    if (known !== undefined) return known;
    const running = inflight.get(key);
    if (running) return running;
    const started = askUpstreams(cache, hashPart)
      .then((value) => {
        answers.set(key, value, value === null ? UPSTREAM_MISS_TTL_MS : UPSTREAM_HIT_TTL_MS);
        return value;
      })
      .finally(() => inflight.delete(key));
    inflight.set(key, started);
    return started;
  }

  return {
    lookupUpstreamNarinfo,

    knownToHaveNone(cacheId) {
      const known = lists.peek(cacheId);
      if (known === undefined || known.value.length > 0) return false;
      // An expired "none" is believed once more while the list is read again (a cache.changed for its upstreams drops it at once).
      if (!known.fresh) {
        upstreamsOf(cacheId).catch((err: unknown) => deps.log.warn({ err, cacheId }, 'the upstream list could not be read again; the old one stays in use'));
      }
      return true;
    },

    async openUpstreamNar(cache, upstreamId, hashPart, path) {
      if (!isProxiablePath(path) || !isStorePathHashPart(hashPart)) return null;
      const upstream = (await upstreamsOf(cache.id)).find((u) => u.id === upstreamId);
      if (!upstream) return null;
      const narinfo = await lookupUpstreamNarinfo(cache, hashPart);
      if (narinfo === null || !narinfo.toString().includes(`\nURL: ${proxiedUrl(upstreamId, hashPart, path)}\n`)) return null;
      const url = `${upstream.url}/${path}`;
      try {
        const head = await headUpstreamFile(upstream.fetch, url, timeoutMs);
        if (head === null) return null;
        if (head.size !== null) {
          const size = head.size;
          return { size, body: (range) => lazyUpstreamBody(upstream.fetch, url, range, timeoutMs) };
        }
        return await spooled(upstream.fetch, url);
      } catch (err) {
        // A 404, not a 5xx: Nix then moves on to its next substituter or builds the path itself.
        deps.log.warn({ err, upstream: upstream.url, cache: cache.name }, `upstream ${upstream.url} failed to deliver ${path}`);
        return null;
      }
    },

    async fetchUpstreamExtra(cacheId, path) {
      if (!isProxiablePath(path)) return null;
      for (const upstream of await upstreamsOf(cacheId)) {
        try {
          const got = await queries.run(() => fetchSmallBytes(upstream.fetch, `${upstream.url}/${path}`, LOG_MAX_BYTES, timeoutMs));
          if (got !== null) return { body: got.body, contentType: got.headers.get('content-type'), contentEncoding: got.headers.get('content-encoding') };
        } catch (err) {
          deps.log.warn({ err, upstream: upstream.url }, `upstream ${upstream.url} did not answer for ${path}; asking the next one`);
        }
      }
      return null;
    },
  };

  /**
   * An upstream that does not say how long the file is: it is downloaded first, then served from
   * disk, and removed once read (a HEAD never reads it: the staging sweeper removes it later).
   */
  async function spooled(upstreamFetch: FetchFunction, url: string): Promise<UpstreamFile | null> {
    const file = deps.tempFile('.upstream');
    const size = await spoolUpstreamFile(upstreamFetch, url, file, deps.maxNarBytes, timeoutMs);
    if (size === null) return null;
    return {
      size,
      body: (range) => ({
        async *[Symbol.asyncIterator]() {
          try {
            if ((await stat(file).catch(() => null)) === null) throw new Error(`the spooled copy of ${url} is gone`);
            if (size > 0) yield* createReadStream(file, range === null ? {} : { start: range.start, end: range.end });
          } finally {
            await rm(file, { force: true });
          }
        },
      }),
    };
  }
}
