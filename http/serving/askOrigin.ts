// A serving thread's own ask of the main thread (docs/http.md, "Serving threads"): a GET with no
// client waiting on it, whose whole small answer comes back for the thread's hot memory to renew an
// entry (threadHotCache.ts). It goes from the thread's loopback connection as itself: no
// forwarded peer, since no client sent it.
import { request as httpRequest } from 'node:http';
import type { ForwardedAnswer, ForwardOrigin } from './forwardHttp.js';

/** GETs `path` from the main thread; `done` gets the answer, or null for an error or one past `maxBytes`. */
export function askOrigin(origin: ForwardOrigin, path: string, maxBytes: number, done: (answer: ForwardedAnswer | null) => void): void {
  let settled = false;
  const finish = (answer: ForwardedAnswer | null): void => {
    if (settled) return;
    settled = true;
    done(answer);
  };
  const ask = httpRequest({ host: '127.0.0.1', port: origin.port, method: 'GET', path, agent: origin.agent });
  ask.on('error', () => finish(null));
  ask.on('response', (answer) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    answer.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes > maxBytes) {
        answer.destroy();
        finish(null);
      } else chunks.push(chunk);
    });
    answer.on('end', () => finish({ status: answer.statusCode ?? 0, headers: answer.headers, body: Buffer.concat(chunks) }));
    answer.on('error', () => finish(null));
  });
  ask.end();
}
