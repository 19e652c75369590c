// The NAR grants a serving thread holds (threadNars.ts; docs/http.md, "Serving threads"): the main
// thread's word that a request without credentials may read a file of a public cache, kept for the
// access TTL per file and cache, dropped by invalidations, and due for renewal past half its life.
import { ACCESS_TTL_MS, canonicalCacheName } from './threadHotCache.js';
import { NAR_SUFFIX } from './narFileName.js';
import type { NarGrant } from './threadMessages.js';

/** Grants kept at most (a few hundred bytes each), oldest out. */
const GRANTS_MAX = 65_536;

/** Spellings of cache names remembered at most (any client can send every mix of cases). */
const SPELLINGS_MAX = 4_096;
/** A grant this old is asked for again, in the background, when it is used (it is still used until it expires). */
export const GRANT_RENEW_AFTER_MS = ACCESS_TTL_MS / 2;

/** `name`: the lower-cased cache name the grant was asked under */
type Kept = NarGrant & { name: string; expires: number };

/**
 * The grants a thread holds: by the file's name as the URL spells it (`{fileHash}.nar.zst`), then
 * the lower-cased cache name. get() runs for every NAR request, so it makes no key: the URL's own
 * file name finds the file's grants, one per cache that granted it (a map, not a list: any tenant
 * can hold the same content-addressed file in many public caches; review r5a-3).
 */
export class NarGrants {
  private readonly grants = new Map<string, Map<string, Kept>>();
  private count = 0;
  /** bumped by every invalidation: a grant asked for before it is used for nothing */
  generation = 0;

  constructor(private readonly now: () => number = Date.now) {}

  /** The live grant of `file` (`{fileHash}.nar.zst`) under the lower-cased cache name. */
  get(cache: string, file: string): NarGrant | undefined {
    const kept = this.grants.get(file)?.get(cache);
    return kept !== undefined && kept.expires > this.now() ? kept : undefined;
  }

  /** Whether a live grant get() gave is past GRANT_RENEW_AFTER_MS of its life (no key made: the NAR path runs this). */
  renewDue(grant: NarGrant): boolean {
    return (grant as Kept).expires - this.now() <= ACCESS_TTL_MS - GRANT_RENEW_AFTER_MS;
  }

  /**
   * Whether the thread held a grant of `file` under the cache, now past GRANT_RENEW_AFTER_MS of its
   * life or expired: worth asking again before a reader waits (a `nix copy` a few seconds after the
   * last finds its grants expired). What this may cost the main thread is bounded by the thread's
   * renewal budget (threadNars.ts, RENEWALS_PER_SECOND; review r5d-1).
   */
  renewable(cache: string, file: string): boolean {
    const kept = this.grants.get(file)?.get(cache);
    return kept !== undefined && this.renewDue(kept);
  }

  /** The main thread no longer grants it. */
  drop(cache: string, file: string): void {
    const byCache = this.grants.get(file);
    if (byCache === undefined || !byCache.delete(cache)) return;
    this.count--;
    if (byCache.size === 0) this.grants.delete(file);
  }

  keep(cache: string, grant: NarGrant): void {
    const file = grant.fileHash + NAR_SUFFIX;
    let byCache = this.grants.get(file);
    if (byCache === undefined) byCache = new Map();
    else this.grants.delete(file); // re-inserted: the most recently granted file is the last out
    this.grants.set(file, byCache);
    if (!byCache.delete(cache)) this.count++;
    byCache.set(cache, { ...grant, name: cache, expires: this.now() + ACCESS_TTL_MS });
    for (const [oldest, kept] of this.grants) {
      if (this.count <= GRANTS_MAX) break;
      this.grants.delete(oldest);
      this.count -= kept.size;
    }
  }

  /** A path of cache `cacheId` was deleted or collected: its file is no longer that cache's to give. */
  forgetFile(cacheId: string, fileHash: string): void {
    this.generation++;
    const file = fileHash + NAR_SUFFIX;
    const byCache = this.grants.get(file);
    if (byCache === undefined) return;
    for (const [name, kept] of byCache) {
      if (kept.cacheId !== cacheId) continue;
      byCache.delete(name);
      this.count--;
    }
    if (byCache.size === 0) this.grants.delete(file);
  }

  /** A cache's settings or access changed, in any spelling of its name. */
  forgetCache(name: string): void {
    this.generation++;
    const lower = name.toLowerCase();
    for (const [file, byCache] of this.grants) {
      if (!byCache.delete(lower)) continue;
      this.count--;
      if (byCache.size === 0) this.grants.delete(file);
    }
  }
}

/** Lower-cased cache names by the URL's spelling: a spelling met before costs a map lookup, not a pattern test and a new string. */
export class CacheSpellings {
  private readonly names = new Map<string, string>();

  /** Only names of the cache name pattern are remembered (at most 63 characters each): any other goes to the main thread. */
  canonical(spelling: string): string | null {
    const known = this.names.get(spelling);
    if (known !== undefined) return known;
    const name = canonicalCacheName(spelling);
    if (name === null) return null;
    if (this.names.size >= SPELLINGS_MAX) this.names.clear();
    this.names.set(spelling, name);
    return name;
  }
}

/** At most `perSecond` takes each second of `clock` (background grant renewals, threadNars.ts). */
export class RenewalBudget {
  private second = 0;
  private left: number;
  constructor(private readonly perSecond: number, private readonly clock: () => number) {
    this.left = perSecond;
  }

  take(): boolean {
    const second = Math.floor(this.clock() / 1000);
    if (second !== this.second) {
      this.second = second;
      this.left = this.perSecond;
    }
    if (this.left <= 0) return false;
    this.left--;
    return true;
  }
}
