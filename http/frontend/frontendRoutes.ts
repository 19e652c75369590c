// Serves the web frontend from memory: its files by path, and index.html for every other GET
// that no route answered and that is not under a path kiln's API, binary cache or sockets own
// (for a page route's path, the index.html that also preloads that route's chunks: routeIndex.ts).
import type { Config } from '../../config/index.js';
import { bytesReply, emptyReply, type Headers, type Reply } from '../reply.js';
import type { RouteTable } from '../router.js';
import { uiSecurityHeaders } from './contentSecurity.js';
import { acceptedEncodings, loadFrontendBuild, type FrontendBuild, type FrontendFile } from './frontendBuild.js';

/**
 * First path segments the UI never answers, whatever the route table holds: a miss under them is
 * the API's JSON 404, never a page. The table's own first segments are added at registration.
 */
const RESERVED = ['api', 'cache', 'proto', 'scim', 'live', 'build-requests', 'build-sources', '_app'];

const NOT_BUILT_PAGE = (problem: string): string =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>kiln</title></head><body>` +
  `<h1>kiln</h1><p>${problem.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`)}</p></body></html>`;

export interface FrontendRoutesOptions {
  /** the build folder; frontend/build unless a test points elsewhere */
  dir?: string;
}

/** Answers `file` with the smallest variant the client accepts, or 304 when its ETag matches. */
function fileReply(file: FrontendFile, header: (name: string) => string | undefined, security: Headers): Reply {
  const headers: Headers = {
    ...security,
    'Content-Type': file.type,
    'Cache-Control': file.immutable ? 'public, max-age=31536000, immutable' : 'no-cache',
    ETag: file.etag,
    Vary: 'Accept-Encoding',
  };
  if (header('if-none-match')?.split(',').some((tag) => tag.trim().replace(/^W\//, '') === file.etag)) return emptyReply(304, headers);
  const accepted = acceptedEncodings(header('accept-encoding'));
  const variant = file.variants.find((v) => accepted.has(v.encoding));
  if (!variant) return bytesReply(200, file.body, headers);
  return bytesReply(200, variant.body, { ...headers, 'Content-Encoding': variant.encoding });
}

/**
 * Installs the UI on `table` when frontend.enable is on; with it off nothing is added and every
 * unknown path stays the API's 404. Call after every other route is registered.
 */
export function frontendRoutes<P>(table: RouteTable<P>, config: Config, options: FrontendRoutesOptions = {}): FrontendBuild | null {
  if (!config['frontend.enable']) return null;
  const build = loadFrontendBuild(options.dir);
  const security = uiSecurityHeaders(config['frontend.logoUrl']);
  const reserved = new Set([...RESERVED, ...table.firstSegments()]);
  if (!build.ok) table.notices.push(`${build.problem}; the UI's paths answer a plain page saying so`);
  table.fallback = (parts, header) => {
    const first = parts[0] ?? '';
    if (build.ok) {
      const file = build.files.get('/' + parts.join('/'));
      if (file) return fileReply(file, header, security);
    }
    if (reserved.has(first)) return undefined;
    if (!build.ok) return bytesReply(404, NOT_BUILT_PAGE(build.problem), { ...security, 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store' });
    return fileReply(build.routeIndex(parts) ?? build.index, header, security);
  };
  return build;
}
