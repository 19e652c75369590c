// A proxy in front of a test kiln that keeps every request it relays (method, path, body) and
// fails the ones a test says, the way a network does: a connection dropped before the server saw
// the request, or after it acted on it, or with only part of the body delivered.
import http from 'node:http';
import type { Test } from 'tap';

export interface Relayed {
  method: string;
  /** path and query, as the client sent them */
  url: string;
  body: Buffer;
}

/**
 * How the proxy treats a request: relay it; drop the connection without relaying it; relay it (or
 * only its first `truncate` bytes, as a shorter chunk) and drop the connection instead of answering.
 */
export type Fault = 'relay' | 'drop' | 'lose-answer' | { truncate: number };

const hopByHop = new Set(['connection', 'keep-alive', 'transfer-encoding', 'host', 'content-length']);
const endToEnd = (headers: http.IncomingHttpHeaders): Record<string, string | string[]> =>
  Object.fromEntries(Object.entries(headers).filter((e): e is [string, string | string[]] => e[1] !== undefined && !hopByHop.has(e[0])));

/** A proxy in front of kiln that keeps every request it was sent and fails the ones `fault` says. */
export async function startFaultProxy(t: Pick<Test, 'teardown'>, target: string, fault: (r: Relayed) => Fault): Promise<{ url: string; seen: Relayed[] }> {
  const seen: Relayed[] = [];
  const server = http.createServer((req, res) => {
    const pieces: Buffer[] = [];
    req.on('data', (piece: Buffer) => void pieces.push(piece));
    req.on('end', () => {
      const relayed = { method: req.method ?? '', url: req.url ?? '', body: Buffer.concat(pieces) };
      seen.push(relayed);
      const what = fault(relayed);
      if (what === 'drop') return void req.socket.destroy();
      const body = typeof what === 'object' ? relayed.body.subarray(0, what.truncate) : relayed.body;
      const out = http.request(`${target}${relayed.url}`, { method: relayed.method, headers: { ...endToEnd(req.headers), 'content-length': body.length } }, (answer) => {
        const back: Buffer[] = [];
        answer.on('data', (piece: Buffer) => void back.push(piece));
        answer.on('end', () => {
          if (what !== 'relay') return void req.socket.destroy();
          res.writeHead(answer.statusCode ?? 502, endToEnd(answer.headers)).end(Buffer.concat(back));
        });
      });
      out.on('error', () => req.socket.destroy());
      out.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, seen };
}
