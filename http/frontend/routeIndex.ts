// Which index.html a page path gets: the build writes one per page route naming that route's own
// chunks as preloads (frontend/scripts/routePreloads.js), so the browser fetches them while the
// shell boots. A path no route matches gets the plain index.html; the router then shows its 404.

/** One page route of the build: its SvelteKit id ("/evals/[id]") and the index.html written for it. */
export interface RouteIndexEntry {
  route: string;
  html: string;
}

interface Matcher<F> {
  /** per segment: the literal it must be, or null for a [param] (any one non-empty segment) */
  segments: (string | null)[];
  file: F;
}

/** A matcher from path segments to the route's index file; `files` resolves an entry's html path. */
export function routeIndex<F>(entries: readonly RouteIndexEntry[], files: (html: string) => F | undefined): (parts: readonly string[]) => F | undefined {
  const matchers: Matcher<F>[] = [];
  for (const entry of entries) {
    const file = files(entry.html);
    if (file === undefined) continue;
    const segments = entry.route.split('/').filter(Boolean).map((s) => (/^\[\w+\]$/.test(s) ? null : s));
    matchers.push({ segments, file });
  }
  // A literal segment wins over a [param] in the same place (as SvelteKit's router decides).
  const specificity = (m: Matcher<F>) => m.segments.map((s) => (s === null ? '0' : '1')).join('');
  matchers.sort((a, b) => (specificity(a) < specificity(b) ? 1 : specificity(a) > specificity(b) ? -1 : 0));
  return (parts) => {
    // A trailing slash is the same page.
    const path = parts.at(-1) === '' ? parts.slice(0, -1) : parts;
    return matchers.find((m) => m.segments.length === path.length && m.segments.every((s, i) => (s === null ? path[i] !== '' : s === path[i])))?.file;
  };
}
