// The serving threads' nodes in the actor tree (GET /api/v1/admin/actors, or the root supervisor's
// inspect() in the test's own process) and their summaries summed, as the serving tests read them; and one GET on a connection of its own (each spreads to a listener the kernel picks).
import { request as httpRequest } from 'node:http';
export interface ActorNode { id: string; status?: string; restarts?: number; summary?: Record<string, unknown>; children?: readonly ActorNode[] }

export const threadNodes = (root: ActorNode): readonly ActorNode[] => root.children?.find((c) => c.id === 'http-threads')?.children ?? [];

/** A numeric field of every serving thread's summary, summed. */
export const threadSum = (root: ActorNode, field: string): number => threadNodes(root).reduce((n, node) => n + Number(node.summary?.[field] ?? 0), 0);

export interface FreshAnswer { status: number; type: string; cacheControl: string; contentRange: string; bytes: Buffer }

/** One GET on a connection of its own; with `pauseMs`, the body is not read for that long after the head (backpressure). */
export function fetchFresh(url: string, headers: Record<string, string> = {}, pauseMs = 0): Promise<FreshAnswer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { agent: false, headers: { connection: 'close', ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      if (pauseMs > 0) {
        res.pause();
        setTimeout(() => res.resume(), pauseMs);
      }
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({
        status: res.statusCode ?? 0, type: String(res.headers['content-type']), cacheControl: String(res.headers['cache-control']),
        contentRange: String(res.headers['content-range']), bytes: Buffer.concat(chunks),
      }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}
