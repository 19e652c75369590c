// A serving thread's hot narinfo memory (docs/http.md, "Serving threads"). The thread learns only
// from answers the main thread gave it for anonymous narinfo GETs, so it never decides access
// itself: an entry is served only while the main thread said, within ACCESS_TTL_MS, that the cache
// answers anonymous readers; invalidations drop entries, and an answer to a request that was
// forwarded before an invalidation arrived is not learned (it may predate the change).
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
}

export class ThreadHotCache {
  private readonly answers = new Map<string, HotAnswer>();
  /** cache name → when the main thread last answered an anonymous reader of it */
  private readonly confirmed = new Map<string, number>();
  private bytes = 0;
  /** bumped by every invalidation: answers to requests forwarded before it are not learned */
  generation = 0;

  constructor(private readonly maxBytes: number, private readonly now: () => number = Date.now) {}

  /** The answer for GET /cache/{cache}/{file} without credentials, when memory may give it. */
  get(name: string, file: string): HotAnswer | undefined {
    const cache = canonicalCacheName(name);
    if (cache === null) return undefined;
    const seen = this.confirmed.get(cache);
    if (seen === undefined) return undefined;
    const now = this.now();
    if (now - seen > ACCESS_TTL_MS) return undefined;
    const answer = this.answers.get(`${cache}/${file}`);
    if (answer === undefined || answer.expires <= now) return undefined;
    return answer;
  }

  /** Learns the main thread's answer to a request forwarded at `generation`. */
  learn(generation: number, name: string, file: string, answer: Omit<HotAnswer, 'expires'>): void {
    const cache = canonicalCacheName(name);
    if (generation !== this.generation || cache === null) return;
    const now = this.now();
    this.confirmed.set(cache, now);
    const key = `${cache}/${file}`;
    this.drop(key);
    const hit = answer.status === 200;
    this.answers.set(key, { ...answer, expires: now + (hit ? HIT_TTL_MS : MISS_TTL_MS) });
    this.bytes += answer.body.length + key.length;
    // Oldest first out (a Map iterates in insertion order).
    for (const oldest of this.answers.keys()) {
      if (this.bytes <= this.maxBytes) break;
      this.drop(oldest);
    }
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
