// The cache a /caches/{name}/… page shows, loaded once by the cache layout and shared with its tabs.
import { getContext, setContext } from 'svelte';
import type { CacheView } from '$protocol/api/caches';
import type { UserView } from '$protocol/api/accounts';

export interface CacheContext {
  readonly cache: CacheView;
  readonly me: UserView;
  /** reloads the cache (after a change that alters it) */
  reload(): Promise<void>;
}

const KEY = Symbol('cache');

export const provideCache = (context: CacheContext): void => {
  setContext(KEY, context);
};

export function cacheContext(): CacheContext {
  const context = getContext<CacheContext | undefined>(KEY);
  if (!context) throw new Error('cacheContext() outside the /caches/[name] layout');
  return context;
}

/** Whether the caller's role on the cache grants `permission`. */
export const may = (cache: CacheView, permission: CacheView['permissions'][number]): boolean => cache.permissions.includes(permission);
