// The Content-Type of a file served out of a NAR, by its extension: enough for a browser to show
// documentation and reports; everything else is a download.
const TYPES: Record<string, string> = {
  html: 'text/html; charset=utf-8', htm: 'text/html; charset=utf-8', css: 'text/css; charset=utf-8',
  js: 'text/javascript; charset=utf-8', mjs: 'text/javascript; charset=utf-8', json: 'application/json',
  txt: 'text/plain; charset=utf-8', md: 'text/markdown; charset=utf-8', xml: 'application/xml',
  svg: 'image/svg+xml', png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', gif: 'image/gif',
  webp: 'image/webp', ico: 'image/vnd.microsoft.icon', pdf: 'application/pdf', wasm: 'application/wasm',
  woff: 'font/woff', woff2: 'font/woff2', gz: 'application/gzip', zst: 'application/zstd', xz: 'application/x-xz',
  tar: 'application/x-tar', zip: 'application/zip',
};

export function contentTypeOf(path: string): string {
  const name = path.slice(path.lastIndexOf('/') + 1);
  const dot = name.lastIndexOf('.');
  return (dot > 0 && TYPES[name.slice(dot + 1).toLowerCase()]) || 'application/octet-stream';
}
