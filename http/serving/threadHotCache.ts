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
// main thread, so everything here belongs to the lower-cased name. Keyed by the URL's spelling, an
// invalidation naming the cache one way would leave the other spellings answering from memory.
// Only names of the cache name pattern are kept at all: a name outside it (other letters whose
// lower case PostgreSQL and JavaScript might see differently) always goes to the main thread.
//
// get() runs for every narinfo request a thread answers, so it makes no object or string: a
// request's spelling of the cache finds the cache's memory through a map of spellings already met
// (each spelling's memory is the one object of its lower-cased name, so an invalidation reset in
// place reaches every spelling), then the file in that cache's own map. Built per request, the
// key `${cache}/${file}` and the lower-cased name were most of the ~580 bytes a request allocated
// (issue 22: young-generation collections every ~200 ms per thread, a pause for every connection
// of the thread each time).

import { isNarFileName } from './narFileName.js';

/** As long as the main thread trusts a cache's settings (services/caches/binaryCacheAccess.ts). */
export const ACCESS_TTL_MS = 5_000;
/** As storage/nars/narReads.ts: hits 60 s, misses 5 s. */
export const HIT_TTL_MS = 60_000;
export const MISS_TTL_MS = 5_000;
/** The share of an entry's TTL by which its expiry is brought forward at random. */
const EXPIRY_SPREAD = 0.25;
/** A refresh not answered within this is given up: the entry is no longer served stale, requests are relayed. */
export const REFRESH_WAIT_MS = 5_000;
/**
 * How often at most a hit tells `narServed` (the thread's NAR grants) that its narinfo was served
 * again: a client fetches a narinfo just before its NAR, so the grant of that NAR can be asked for
 * again before the NAR request comes, instead of while it waits (threadNars.ts).
 */
export const NAR_SERVED_EVERY_MS = ACCESS_TTL_MS / 4;
/** Spellings remembered at most: any client can send every mix of cases, and each is only a shortcut. */
const SPELLINGS_MAX = 4_096;

/** The names a cache may have (storage/db/migrations/0002_model.sql, caches.name). */
const CACHE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;

/** The one spelling of a cache's name this memory knows it by, or null for a name it never keeps. */
export function canonicalCacheName(name: string): string | null {
  return CACHE_NAME.test(name) ? name.toLowerCase() : null;
}

/** What the main thread answered, as a thread keeps it. */
export interface LearnedAnswer {
  status: number;
  contentType: string;
  xCache: string | null;
  body: Buffer;
}

export interface HotAnswer extends LearnedAnswer {
  expires: number;
  /** the file hash of the NAR a hit's narinfo points at (`URL: nar/<file hash>.nar.zst`), else null */
  readonly narFile: string | null;
  /** when `narServed` may hear of this entry again */
  narServedNext: number;
  /** when a refresh of this expired entry was asked for, 0 when none is under way */
  refreshing: number;
  /** where it is kept (for the oldest-out order) */
  readonly memory: CacheMemory;
  readonly file: string;
}

/** All a thread knows of one cache (every spelling of its name). */
interface CacheMemory {
  /** the lower-cased name */
  readonly name: string;
  /** when the main thread last answered an anonymous reader of it, 0 when it must answer again */
  confirmed: number;
  /** when a refresh was asked for to renew the access word, 0 when none is under way */
  confirming: number;
  readonly answers: Map<string, HotAnswer>;
}

/** Asks the main thread again for GET /cache/{cache}/{file}, its answer going to learn(), renew() or refreshFailed(). */
export type Refresh = (cache: string, file: string, held: HotAnswer) => void;

/** Hears that a hit naming NAR file `fileHash` of cache `cache` (the lower-cased name) was served. */
export type NarServed = (cache: string, fileHash: string) => void;

const NAR_URL = Buffer.from('\nURL: nar/');

/** The file hash of the stored NAR a narinfo's URL line names (kiln's own narinfos: `nar/<file hash>.nar.zst`), else null. */
export function narinfoNarFile(body: Buffer): string | null {
  const at = body.indexOf(NAR_URL);
  if (at < 0) return null;
  const start = at + NAR_URL.length;
  const name = body.toString('latin1', start, start + 60);
  return isNarFileName(name) ? name.slice(0, 52) : null;
}

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
  /** lower-cased name → the cache's memory; an invalidation resets a memory in place, never replaces it */
  private readonly caches = new Map<string, CacheMemory>();
  /** a spelling met in a request → its cache's memory (only caches this memory holds) */
  private readonly spellings = new Map<string, CacheMemory>();
  /** every answer kept, oldest learned first */
  private readonly order = new Set<HotAnswer>();
  private bytes = 0;
  /** bumped by every invalidation: answers to requests forwarded before it are not learned */
  generation = 0;

  /** `narServed` hears of hits that name a NAR file, at most once per NAR_SERVED_EVERY_MS per entry. */
  constructor(private readonly maxBytes: number, private readonly now: () => number = Date.now, private readonly narServed?: NarServed) {}

  /**
   * The answer for GET /cache/{cache}/{file} without credentials, when memory may give it; calls
   * `refresh` (at most one under way per entry, and per cache for its access word) when the
   * answer has expired or the cache's access word is half its TTL old.
   */
  get(name: string, file: string, refresh?: Refresh): HotAnswer | undefined {
    const memory = this.spellings.get(name) ?? this.meet(name);
    if (memory === undefined || memory.confirmed === 0) return undefined;
    const now = this.now();
    if (now - memory.confirmed > ACCESS_TTL_MS) return undefined;
    const answer = memory.answers.get(file);
    if (answer === undefined) return undefined;
    if (answer.expires <= now) {
      if (answer.refreshing !== 0) return now - answer.refreshing < REFRESH_WAIT_MS ? answer : undefined;
      if (refresh === undefined) return undefined;
      answer.refreshing = now;
      refresh(memory.name, file, answer);
    } else if (refresh !== undefined && now - memory.confirmed > ACCESS_TTL_MS / 2 && (memory.confirming === 0 || now - memory.confirming >= REFRESH_WAIT_MS)) {
      memory.confirming = now;
      refresh(memory.name, file, answer);
    }
    if (answer.narFile !== null && answer.narServedNext <= now && this.narServed !== undefined) {
      answer.narServedNext = now + NAR_SERVED_EVERY_MS;
      this.narServed(memory.name, answer.narFile);
    }
    return answer;
  }

  /** The memory of a spelling not met yet, remembered for the next request when the cache is known. */
  private meet(name: string): CacheMemory | undefined {
    const cache = canonicalCacheName(name);
    const memory = cache === null ? undefined : this.caches.get(cache);
    if (memory === undefined) return undefined;
    if (this.spellings.size >= SPELLINGS_MAX) this.spellings.clear();
    this.spellings.set(name, memory);
    return memory;
  }

  /** Learns the main thread's answer to a request forwarded at `generation`. */
  learn(generation: number, name: string, file: string, answer: LearnedAnswer): void {
    const cache = canonicalCacheName(name);
    if (generation !== this.generation || cache === null) return;
    const now = this.now();
    let memory = this.caches.get(cache);
    if (memory === undefined) this.caches.set(cache, (memory = { name: cache, confirmed: 0, confirming: 0, answers: new Map() }));
    memory.confirmed = now;
    memory.confirming = 0;
    const old = memory.answers.get(file);
    if (old !== undefined) this.drop(old);
    const kept: HotAnswer = {
      status: answer.status, contentType: answer.contentType, xCache: answer.xCache, body: ownBytes(answer.body),
      expires: now + this.ttl(answer.status), refreshing: 0, memory, file,
      narFile: answer.status === 200 ? narinfoNarFile(answer.body) : null, narServedNext: 0,
    };
    memory.answers.set(file, kept);
    this.order.add(kept);
    this.bytes += kept.body.length + file.length;
    // Oldest first out (a Set iterates in insertion order).
    for (const oldest of this.order) {
      if (this.bytes <= this.maxBytes) break;
      this.drop(oldest);
    }
  }

  /**
   * The main thread's answer to a refresh asked at `generation` is the one `held` (the entry the
   * refresh was asked for): its life starts again, and the access word with it, without another
   * copy of the body. False when the entry is no longer the one held (dropped, replaced, or an
   * invalidation came since): nothing is renewed.
   */
  renew(generation: number, held: HotAnswer): boolean {
    if (generation !== this.generation || held.memory.answers.get(held.file) !== held) return false;
    const now = this.now();
    held.memory.confirmed = now;
    held.memory.confirming = 0;
    held.expires = now + this.ttl(held.status);
    held.refreshing = 0;
    return true;
  }

  /**
   * A refresh's answer was not learned. `refused`: the main thread answered what memory may not
   * keep (a refusal, an upstream's narinfo, an error): the entry and the cache's access word are
   * dropped, so the next request goes to the main thread, which words the answer. Otherwise the
   * ask predated an invalidation: the next request asks again.
   */
  refreshFailed(name: string, file: string, refused: boolean): void {
    const cache = canonicalCacheName(name);
    const memory = cache === null ? undefined : this.caches.get(cache);
    if (memory === undefined) return;
    memory.confirming = 0;
    const answer = memory.answers.get(file);
    if (refused) {
      memory.confirmed = 0;
      if (answer !== undefined) this.drop(answer);
      return;
    }
    if (answer !== undefined) answer.refreshing = 0;
  }

  /** A path changed: its narinfo in every cache is forgotten. */
  forgetPath(hashPart: string): void {
    this.generation++;
    const file = `${hashPart}.narinfo`;
    for (const memory of this.caches.values()) {
      const answer = memory.answers.get(file);
      if (answer !== undefined) this.drop(answer);
    }
  }

  /** A cache's settings or access changed: nothing the thread knows of it is served until the main thread answers again. */
  forgetCache(name: string): void {
    this.generation++;
    // Whatever the spelling of the event: every spelling of the cache is one memory here.
    const memory = this.caches.get(name.toLowerCase());
    if (memory === undefined) return;
    memory.confirmed = 0;
    memory.confirming = 0;
    for (const answer of [...memory.answers.values()]) this.drop(answer);
  }

  /**
   * An entry's life: hits 60 s, misses 5 s, each shortened by up to a quarter at random: entries
   * learned together (a client asking for many paths at once) would otherwise expire together, and
   * their refreshes reach the main thread as one burst every TTL.
   */
  private ttl(status: number): number {
    const ttl = status === 200 ? HIT_TTL_MS : MISS_TTL_MS;
    return ttl - Math.floor(Math.random() * ttl * EXPIRY_SPREAD);
  }

  private drop(answer: HotAnswer): void {
    if (answer.memory.answers.get(answer.file) === answer) answer.memory.answers.delete(answer.file);
    if (this.order.delete(answer)) this.bytes -= answer.body.length + answer.file.length;
  }
}
