// Event globs, as webhooks, task actions and the firehose take them: `*` matches any run of
// characters, dots included (`build.*` matches build.queued and build.status_changed, `cache.*`
// matches cache.nar.upload), `?` matches one character; everything else matches itself. An empty
// list matches every event.
import { z } from 'zod';

export const EventGlob = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[a-z0-9_.*?]+$/, 'an event glob is made of lowercase letters, digits, "_", ".", "*" and "?"');

export const EventGlobs = z.array(EventGlob).max(100);

export type EventMatcher = (name: string) => boolean;

const everything: EventMatcher = () => true;

function globSource(glob: string): string {
  return glob.replace(/[.*?]/g, (c) => (c === '.' ? '\\.' : c === '*' ? '.*' : '.'));
}

export function compileEventGlobs(globs: readonly string[]): EventMatcher {
  if (globs.length === 0) return everything;
  const pattern = new RegExp(`^(?:${globs.map(globSource).join('|')})$`);
  return (name) => pattern.test(name);
}

const cache = new Map<string, EventMatcher>();
const CACHE_LIMIT = 10_000;

/** compileEventGlobs with a cache, for the globs of stored webhooks that are matched again and again. */
export function eventMatcher(globs: readonly string[]): EventMatcher {
  const key = globs.join('\n');
  let matcher = cache.get(key);
  if (!matcher) {
    if (cache.size >= CACHE_LIMIT) cache.clear();
    matcher = compileEventGlobs(globs);
    cache.set(key, matcher);
  }
  return matcher;
}

/** `a, b,c` → ['a', 'b', 'c'] (the firehose's `events` query parameter); empty parts are dropped. */
export function splitEventGlobs(text: string | null | undefined): string[] {
  return (text ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '');
}
