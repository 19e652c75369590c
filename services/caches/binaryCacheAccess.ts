// Who may read or write a cache at the binary cache paths (spec: Authentication 7): public caches
// are open, private ones take HTTP Basic with any user name and a session token or API key as the
// password. These answers are asked for on every narinfo and NAR request, so they are remembered
// briefly: a revoked credential takes effect here within seconds, and a cache's change at once, in
// every server process (the memo listens for cache.changed on the event bus).
import { createHash } from 'node:crypto';
import type { Sql } from 'postgres';
import { cacheServingRow, TtlMap, type EventBus, type SecretBox } from '../../storage/index.js';
import { accessOf } from '../access/index.js';
import { CACHE_SETTINGS_REASONS, onCacheChanged } from './cacheChanges.js';
import { cachePublicKeyText } from './cacheKeys.js';
import { basicPassword, cacheReadTokenOpens, looksLikeCacheReadToken } from './cacheReadTokens.js';
import { anonymous, type Principal } from '../access/index.js';
import { cacheTarget, findCache } from '../access/index.js';

/** How long a cache's settings and a caller's access are trusted without asking the database. */
export const CACHE_SETTINGS_TTL_MS = 5_000;
export const CREDENTIALS_TTL_MS = 10_000;
/** Entries each memo keeps at most, so that a stream of distinct credentials cannot grow it without bound. */
const REMEMBERED_MAX = 10_000;

export interface BinaryCache {
  id: string;
  name: string;
  public: boolean;
  active: boolean;
  priority: number;
  /** applied instead of `priority` for clients in http.localIps when non-zero */
  localPriority: number;
  /** `<key name>:<base64>`, what trusted-public-keys takes */
  publicKey: string;
}

export type CacheAccess =
  /**
   * the caller's owner may see the cache (or it is public); what the credentials may do there is
   * canRead (viewCache) and canWrite (writeStore): an API key acts with its own permission list
   * intersected with its owner's role (spec, Authentication 3), here as on the REST API
   */
  | { kind: 'visible'; cache: BinaryCache; principal: Principal; canRead: boolean; canWrite: boolean }
  /** private cache, no credentials: 401 with a Basic challenge */
  | { kind: 'challenge' }
  /** no such cache, an inactive one, or one the caller may not see: 404 */
  | { kind: 'hidden' };

export interface BinaryCacheAccessDeps {
  sql: Sql;
  /** opens build jobs' cache read tokens */
  secretBox: SecretBox;
  /** the identity helper's HTTP Basic check (http/authenticate.ts); null without Basic credentials */
  authenticateBasic(header: string | undefined, peerAddress: string): Promise<Principal | null>;
  /** where cache.changed arrives from this process and the others: what is remembered of that cache is forgotten */
  bus: Pick<EventBus, 'subscribe'>;
  now?: () => number;
}

export interface BinaryCacheAccess {
  /** What resolve() answered for these arguments within the last seconds, without waiting; undefined when it must ask. */
  peek(name: string, authorization: string | undefined, peerAddress: string): CacheAccess | undefined;
  /** The cache `name` as the request's Authorization header may see it. ApiError 401/403 for bad credentials. */
  resolve(name: string, authorization: string | undefined, peerAddress: string): Promise<CacheAccess>;
}

interface Decision {
  visible: boolean;
  canRead: boolean;
  canWrite: boolean;
}

const principalKey = (p: Principal): string => (p.kind === 'user' ? (p.via === 'key' ? `k:${p.keyId}` : `s:${p.sessionId}`) : 'anonymous');

export function createBinaryCacheAccess(deps: BinaryCacheAccessDeps): BinaryCacheAccess {
  const now = deps.now ?? Date.now;
  const caches = new TtlMap<BinaryCache | null>(REMEMBERED_MAX, now);
  const credentials = new TtlMap<Principal>(REMEMBERED_MAX, now);
  const decisions = new TtlMap<Decision>(REMEMBERED_MAX, now);
  // The whole answer per (cache, credentials, address): a narinfo request then costs one lookup.
  const answers = new TtlMap<CacheAccess>(REMEMBERED_MAX, now);
  const resolving = new Map<string, Promise<CacheAccess>>();
  // A cache's settings decide every answer that names it and every decision on it: they all go.
  onCacheChanged(deps.bus, CACHE_SETTINGS_REASONS, ({ cache }) => {
    caches.delete(cache.toLowerCase());
    answers.clear();
    resolving.clear();
    decisions.clear();
  });

  async function cacheNamed(name: string): Promise<BinaryCache | null> {
    const key = name.toLowerCase();
    const known = caches.get(key);
    if (known !== undefined) return known;
    const row = await cacheServingRow(deps.sql, name);
    const cache: BinaryCache | null = row
      ? {
          id: row.id,
          name: row.name,
          public: row.public,
          active: row.active,
          priority: row.priority,
          localPriority: row.local_priority,
          publicKey: cachePublicKeyText(row),
        }
      : null;
    caches.set(key, cache, CACHE_SETTINGS_TTL_MS);
    return cache;
  }

  async function principalOf(authorization: string | undefined, peerAddress: string): Promise<Principal> {
    if (!authorization) return anonymous;
    // API keys may be limited to source addresses, so the address is part of what is remembered.
    const key = createHash('sha256').update(`${peerAddress}\n${authorization}`).digest('base64');
    const known = credentials.get(key);
    if (known !== undefined) return known;
    const principal = (await deps.authenticateBasic(authorization, peerAddress)) ?? anonymous;
    credentials.set(key, principal, CREDENTIALS_TTL_MS);
    return principal;
  }

  async function decide(cache: BinaryCache, who: Principal): Promise<Decision> {
    const key = `${cache.id}|${principalKey(who)}`;
    const known = decisions.get(key);
    if (known !== undefined) return known;
    let decision: Decision = { visible: cache.public, canRead: cache.public, canWrite: false };
    if (who.kind === 'user') {
      const row = await findCache(deps.sql, who, cache.name);
      const access = row ? accessOf(who, cacheTarget(row)) : null;
      // Reading a private cache takes viewCache among the caller's permissions, not only a role
      // that sees the cache: a key holding just viewProject is refused here as on GET
      // /caches/{cache}. A public cache is read by anyone the pin lets near it: the key could
      // drop its credentials and read anonymously, and Nix sends its netrc password everywhere.
      const canRead = access !== null && (access.permissions.has('viewCache') || (cache.public && access.visible));
      decision = access
        ? { visible: access.visible, canRead, canWrite: access.permissions.has('writeStore') }
        : { visible: false, canRead: false, canWrite: false };
    }
    decisions.set(key, decision, CREDENTIALS_TTL_MS);
    return decision;
  }

  // Anonymous answers do not depend on the address; a credential's may (allowed_ips).
  const answerKey = (name: string, authorization: string | undefined, peerAddress: string) =>
    authorization ? `${name.toLowerCase()}\n${peerAddress}\n${authorization}` : name.toLowerCase();

  return {
    peek(name, authorization, peerAddress) {
      return answers.get(answerKey(name, authorization, peerAddress));
    },

    resolve(name, authorization, peerAddress) {
      const key = answerKey(name, authorization, peerAddress);
      const known = answers.get(key);
      if (known !== undefined) return Promise.resolve(known);
      // When an answer expires under load, every request in flight would otherwise query again.
      const running = resolving.get(key);
      if (running !== undefined) return running;
      const started: Promise<CacheAccess> = resolveAnew(key, name, authorization, peerAddress).finally(() => {
        if (resolving.get(key) === started) resolving.delete(key);
      });
      resolving.set(key, started);
      return started;
    },
  };

  async function resolveAnew(key: string, name: string, authorization: string | undefined, peerAddress: string): Promise<CacheAccess> {
    const cache = await cacheNamed(name);
    let answer: CacheAccess;
    if (cache === null || !cache.active) answer = { kind: 'hidden' };
    else if (looksLikeCacheReadToken(basicPassword(authorization) ?? '')) {
      // a build job's read token (services/caches/cacheReadTokens.ts): reads the caches it names, nothing else
      answer = cacheReadTokenOpens(deps.secretBox, basicPassword(authorization)!, cache.id, now())
        ? { kind: 'visible', cache, principal: anonymous, canRead: true, canWrite: false }
        : { kind: 'hidden' };
    } else {
      const principal = await principalOf(authorization, peerAddress);
      const { visible, canRead, canWrite } = await decide(cache, principal);
      if (visible) answer = { kind: 'visible', cache, principal, canRead, canWrite };
      else answer = principal.kind === 'anonymous' ? { kind: 'challenge' } : { kind: 'hidden' };
    }
    answers.set(key, answer, CACHE_SETTINGS_TTL_MS);
    return answer;
  }
}
