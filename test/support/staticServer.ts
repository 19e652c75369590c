// A static file server over node:http, standing in for nginx in front of a `nix copy --to file://`
// cache: GET and HEAD with Content-Length (or without it, to play an upstream that streams chunked),
// a single Range, and a count of the narinfo requests in flight at once.
import { createReadStream, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join, normalize } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Test } from 'tap';

export interface StaticServer {
  url: string;
  /** the most narinfo requests that were being answered at the same moment */
  readonly maxConcurrentNarinfos: number;
  /** every request path, in order */
  readonly requests: string[];
}

export interface StaticServerOptions {
  /** leave out Content-Length on NAR files (GET and HEAD), as a chunked upstream would */
  chunked?: boolean;
  /** hold each narinfo answer this long, so that concurrent requests overlap */
  narinfoDelayMs?: number;
}

export async function startStaticServer(t: Pick<Test, 'teardown'>, root: string, opts: StaticServerOptions = {}): Promise<StaticServer> {
  let inFlight = 0;
  const state = { maxConcurrentNarinfos: 0, requests: [] as string[] };
  const server: Server = createServer((req, res) => {
    void (async () => {
      const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
      state.requests.push(`${req.method} ${path}`);
      const file = normalize(join(root, path));
      const size = file.startsWith(root) ? statSync(file, { throwIfNoEntry: false }) : undefined;
      const isNarinfo = path.endsWith('.narinfo');
      if (isNarinfo) state.maxConcurrentNarinfos = Math.max(state.maxConcurrentNarinfos, ++inFlight);
      try {
        if (isNarinfo && opts.narinfoDelayMs) await sleep(opts.narinfoDelayMs);
        if (!size?.isFile()) {
          res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
          return;
        }
        const chunked = opts.chunked === true && path.includes('/nar/');
        const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
        const start = range ? Number(range[1]) : 0;
        const end = range && range[2] ? Math.min(Number(range[2]), size.size - 1) : size.size - 1;
        const headers: Record<string, string> = { 'content-type': 'application/octet-stream' };
        if (!chunked) headers['content-length'] = String(end - start + 1);
        if (range && !chunked) headers['content-range'] = `bytes ${start}-${end}/${size.size}`;
        res.writeHead(range && !chunked ? 206 : 200, headers);
        if (req.method === 'HEAD') {
          res.end();
          return;
        }
        createReadStream(file, range && !chunked ? { start, end } : {}).pipe(res);
      } finally {
        if (isNarinfo) inFlight--;
      }
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    get maxConcurrentNarinfos() {
      return state.maxConcurrentNarinfos;
    },
    requests: state.requests,
  };
}
