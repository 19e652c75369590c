// The web frontend's build (frontend/build, written by `npm run build:frontend`), read into memory
// once at start with the .gz/.br/.zst variants the build wrote beside each file.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { routeIndex } from './routeIndex.js';

/** Where `npm run build:frontend` writes, relative to this file. */
export const DEFAULT_FRONTEND_DIR = fileURLToPath(new URL('../../frontend/build', import.meta.url));

export type Encoding = 'br' | 'zstd' | 'gzip';
const SUFFIXES: Record<Encoding, string> = { br: '.br', zstd: '.zst', gzip: '.gz' };

const TYPES: Record<string, string> = {
  html: 'text/html; charset=utf-8', js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8',
  json: 'application/json', svg: 'image/svg+xml', png: 'image/png', ico: 'image/x-icon', txt: 'text/plain; charset=utf-8',
  woff2: 'font/woff2', webmanifest: 'application/manifest+json', map: 'application/json',
};

/** Where frontend/scripts/routePreloads.js writes an index.html per page route, and routes.json naming them. */
const ROUTES_DIR = '/_app/routes/';
const RouteTableFile = z.array(z.object({ route: z.string(), html: z.string() }));

export interface FrontendFile {
  type: string;
  body: Buffer;
  /** the precompressed variants present, smallest first */
  variants: { encoding: Encoding; body: Buffer }[];
  etag: string;
  /** under _app/immutable/: the name carries the content hash, so it never changes */
  immutable: boolean;
}

export type FrontendBuild =
  | {
    ok: true; dir: string; files: Map<string, FrontendFile>; index: FrontendFile;
    /** the index.html written for the page route `parts` falls under (its chunks preloaded), if any */
    routeIndex: (parts: readonly string[]) => FrontendFile | undefined;
  }
  | { ok: false; dir: string; problem: string };

/** Reads every file of `dir` keyed by its URL path ("/_app/…"); a missing or partial build is reported, not thrown. */
export function loadFrontendBuild(dir: string = DEFAULT_FRONTEND_DIR): FrontendBuild {
  if (!existsSync(join(dir, 'index.html'))) {
    return { ok: false, dir, problem: `the web frontend is not built (no ${join(dir, 'index.html')}); run \`npm run build:frontend\`` };
  }
  const files = new Map<string, FrontendFile>();
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || /\.(gz|br|zst)$/.test(entry.name)) continue;
    const path = join(entry.parentPath, entry.name);
    const urlPath = '/' + relative(dir, path).split(sep).join('/');
    const body = readFileSync(path);
    const variants = (Object.keys(SUFFIXES) as Encoding[])
      .filter((encoding) => existsSync(path + SUFFIXES[encoding]))
      .map((encoding) => ({ encoding, body: readFileSync(path + SUFFIXES[encoding]) }))
      // A variant no smaller than the original is not worth a Content-Encoding.
      .filter((v) => v.body.length < body.length)
      .sort((a, b) => a.body.length - b.body.length);
    const extension = entry.name.slice(entry.name.lastIndexOf('.') + 1);
    files.set(urlPath, {
      type: TYPES[extension] ?? 'application/octet-stream',
      body,
      variants,
      etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`,
      immutable: urlPath.startsWith('/_app/immutable/'),
    });
  }
  const index = files.get('/index.html');
  if (!index) return { ok: false, dir, problem: `the web frontend build in ${dir} has no index.html` };
  // The per-route index files are served for page paths only, never by their own path.
  const routes = new Map([...files].filter(([path]) => path.startsWith(ROUTES_DIR)));
  for (const path of routes.keys()) files.delete(path);
  const table = routes.get(`${ROUTES_DIR}routes.json`);
  let entries: z.infer<typeof RouteTableFile> = [];
  if (table) {
    let parsed;
    try {
      parsed = RouteTableFile.safeParse(JSON.parse(table.body.toString('utf8')));
    } catch {
      parsed = null;
    }
    if (!parsed?.success) return { ok: false, dir, problem: `the web frontend build's ${ROUTES_DIR}routes.json is malformed; run \`npm run build:frontend\`` };
    entries = parsed.data;
  }
  return { ok: true, dir, files, index, routeIndex: routeIndex(entries, (html) => routes.get(html)) };
}

/** The encodings an Accept-Encoding header allows (q > 0); `identity` is always acceptable. */
export function acceptedEncodings(header: string | undefined): Set<Encoding> {
  const accepted = new Set<Encoding>();
  for (const part of (header ?? '').split(',')) {
    const [name, ...params] = part.trim().toLowerCase().split(';');
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    if (q !== undefined && !(Number(q.slice(2)) > 0)) continue;
    if (name === 'br' || name === 'zstd' || name === 'gzip') accepted.add(name);
  }
  return accepted;
}
