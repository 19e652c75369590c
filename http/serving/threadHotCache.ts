// A serving thread's hot narinfo memory (docs/http.md, "Serving threads"). The thread learns only
// from answers the main thread gave it for anonymous narinfo GETs, so it never decides access
// itself: an entry is served only while the main thread said, within ACCESS_TTL_MS, that the cache
// answers anonymous readers; invalidations drop entries, and an answer to a request that was
// forwarded before an invalidation arrived is not learned (it may predate the change).
//
// Entries are refreshed in the background, as the main thread's own hot cache is
// (storage/nars/narReads.ts): an expired answer is served once more while one refresh asks the main
// thread, and a cache whose access word is half its TTL old has one refresh ask again. Without
// that, every miss expired into a relayed request every 5 s, all at once, and the access word into
// a wave of relays for every connection (issue 22: misses at 0.62x nginx). An access word is
// never served past its TTL: a refresh only brings the next one sooner.
//
// Cache names are case-insensitive (citext): `/cache/PUB/…` and `/cache/pub/…` are one cache to the
// main thread, so everything here is keyed by the lower-cased name. Keyed by the URL's spelling, an
// invalidation naming the cache one way would leave the other spellings answering from memory.
// Only names of the cache name pattern are kept at all: a name outside it (other letters whose
// lower case PostgreSQL and JavaScript might see differently) always goes to the main thread.

/** As long as the main thread trusts a cache's settings (services/caches/binaryCacheAccess.ts). */
export const ACCESS_TTL_MS = 5_000;
/** As storage/nars/narReads.ts: hits 60 s, misses 5 s. */
export const HIT_TTL_MS = 60_000;
export const MISS_TTL_MS = 5_000;
/** The share of an entry's TTL by which its expiry is brought forward at random. */
const EXPIRY_SPREAD = 0.25;
/** A refresh not answered within this is given up: the entry is no longer served stale, requests are relayed. */
export const REFRESH_WAIT_MS = 5_000;

/** The names a cache may have (storage/db/migrations/0002_model.sql, caches.name). */
const CACHE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;

/** The one spelling of a cache's name this memory knows it by, or null for a name it never keeps. */
export function canonicalCacheName(name: string): string | null {
  return CACHE_NAME.test(name) ? name.toLowerCase() : null;
}

export interface HotAnswer {
  status: number;
  contentType: string;
  xCache: string | null;
  body: Buffer;
  expires: number;
  /** when a refresh of this expired entry was asked for, 0 when none is under way */
  refreshing: number;
}

/** Asks the main thread again for GET /cache/{cache}/{file}, its answer going to learn() or refreshFailed(). */
export type Refresh = (cache: string, file: string) => void;

/**
 * The body in a buffer of exactly its size. A short answer usually views a larger block: Node's
 * shared 8 KiB pool (Buffer.concat, Buffer.from of a string) or a message's whole backing store.
 * Kept as a view, one ~500-byte narinfo held its 8 KiB block, so the memory grew far past what
 * `bytes` counted (issue 22: the threads' external memory grew by 37-52 MiB over a miss run).
 */
function ownBytes(body: Buffer): Buffer {
  if (body.byteOffset === 0 && body.buffer.byteLength === body.byteLength) return body;
  const own = Buffer.allocUnsafeSlow(body.byteLength);
  body.copy(own);
  return own;
}

export class ThreadHotCache {
  private readonly answers = new Map<string, HotAnswer>();
  /** cache name → when the main thread last answered an anonymous reader of it */
  private readonly confirmed = new Map<string, number>();
  /** cache name → when a refresh was asked for to renew its access word */
  private readonly confirming = new Map<string, number>();
  private bytes = 0;
  /** bumped by every invalidation: answers to requests forwarded before it are not learned */
  generation = 0;

  constructor(private readonly maxBytes: number, private readonly now: () => number = Date.now) {}

  /**
   * The answer for GET /cache/{cache}/{file} without credentials, when memory may give it; calls
   * `refresh` (at most one under way per entry, and per cache for its access word) when the
   * answer has expired or the cache's access word is half its TTL old.
   */
  get(name: string, file: string, refresh?: Refresh): HotAnswer | undefined {
    const cache = canonicalCacheName(name);
    if (cache === null) return undefined;
    const seen = this.confirmed.get(cache);
    if (seen === undefined) return undefined;
    const now = this.now();
    if (now - seen > ACCESS_TTL_MS) return undefined;
    const answer = this.answers.get(`${cache}/${file}`);
    if (answer === undefined) return undefined;
    if (answer.expires <= now) {
      if (answer.refreshing !== 0) return now - answer.refreshing < REFRESH_WAIT_MS ? answer : undefined;
      if (refresh === undefined) return undefined;
      answer.refreshing = now;
      refresh(cache, file);
    } else if (refresh !== undefined && now - seen > ACCESS_TTL_MS / 2) {
      const asked = this.confirming.get(cache);
      if (asked === undefined || now - asked >= REFRESH_WAIT_MS) {
        this.confirming.set(cache, now);
        refresh(cache, file);
      }
    }
    return answer;
  }

  /** Learns the main thread's answer to a request forwarded at `generation`. */
  learn(generation: number, name: string, file: string, answer: Omit<HotAnswer, 'expires' | 'refreshing'>): void {
    const cache = canonicalCacheName(name);
    if (generation !== this.generation || cache === null) return;
    const now = this.now();
    this.confirmed.set(cache, now);
    this.confirming.delete(cache);
    const key = `${cache}/${file}`;
    this.drop(key);
    const hit = answer.status === 200;
    // Each entry's life is shortened by up to a quarter, at random: entries learned together (a
    // client asking for many paths at once) would otherwise expire together, and their refreshes
    // reach the main thread as one burst of loopback requests every TTL.
    const ttl = hit ? HIT_TTL_MS : MISS_TTL_MS;
    this.answers.set(key, { ...answer, body: ownBytes(answer.body), expires: now + ttl - Math.floor(Math.random() * ttl * EXPIRY_SPREAD), refreshing: 0 });
    this.bytes += answer.body.length + key.length;
    // Oldest first out (a Map iterates in insertion order).
    for (const oldest of this.answers.keys()) {
      if (this.bytes <= this.maxBytes) break;
      this.drop(oldest);
    }
  }

  /**
   * A refresh's answer was not learned. `refused`: the main thread answered what memory may not
   * keep (a refusal, an upstream's narinfo, an error): the entry and the cache's access word are
   * dropped, so the next request goes to the main thread, which words the answer. Otherwise the
   * ask predated an invalidation: the next request asks again.
   */
  refreshFailed(name: string, file: string, refused: boolean): void {
    const cache = canonicalCacheName(name);
    if (cache === null) return;
    this.confirming.delete(cache);
    const key = `${cache}/${file}`;
    if (refused) {
      this.confirmed.delete(cache);
      this.drop(key);
      return;
    }
    const answer = this.answers.get(key);
    if (answer !== undefined) answer.refreshing = 0;
  }

  /** A path changed: its narinfo in every cache is forgotten. */
  forgetPath(hashPart: string): void {
    this.generation++;
    const file = `/${hashPart}.narinfo`;
    for (const key of [...this.answers.keys()]) if (key.endsWith(file)) this.drop(key);
  }

  /** A cache's settings or access changed: nothing the thread knows of it is served until the main thread answers again. */
  forgetCache(name: string): void {
    this.generation++;
    // Whatever the spelling of the event: every spelling of the cache is one key here.
    const cache = name.toLowerCase();
    this.confirmed.delete(cache);
    this.confirming.delete(cache);
    const prefix = `${cache}/`;
    for (const key of [...this.answers.keys()]) if (key.startsWith(prefix)) this.drop(key);
  }

  private drop(key: string): void {
    const old = this.answers.get(key);
    if (old === undefined) return;
    this.answers.delete(key);
    this.bytes -= old.body.length + key.length;
  }
}
