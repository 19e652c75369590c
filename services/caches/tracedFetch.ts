// Upstream fetches as stage spans (log.traceDir; docs/metrics.md, "Stage traces"): every request
// kiln sends to an upstream cache is one `upstream.fetch` span, from the request to its response
// head (a NAR's body streams to the client afterwards, at the client's pace, so its time says
// nothing about the upstream). Each is a trace of its own. The span names the upstream's host and
// the path, never the query (a presigned S3 redirect carries its signature there) nor credentials.
import { newTraceRoot } from '../../protocol/index.js';
import type { StageTracer } from '../../config/index.js';
import type { FetchFunction } from './upstreamFetch.js';

/** What the request asked for, from its path: a narinfo, a NAR file, or something else (a log, a listing). */
const kindOf = (path: string): string => (path.endsWith('.narinfo') ? 'narinfo' : path.includes('/nar/') ? 'nar' : 'other');

export function tracedFetch(fetchFn: FetchFunction, tracer: StageTracer): FetchFunction {
  if (!tracer.enabled) return fetchFn;
  return async (input, init) => {
    const url = new URL(String(input));
    const end = tracer.start('upstream.fetch', newTraceRoot(), {
      method: init?.method ?? 'GET', host: url.host, path: url.pathname.slice(0, 300), kind: kindOf(url.pathname),
    });
    try {
      const response = await fetchFn(input, init);
      end(response.status < 500 ? 'ok' : 'error', { status: response.status });
      return response;
    } catch (error) {
      end('error', { error: (error instanceof Error ? error.message : String(error)).slice(0, 300) });
      throw error;
    }
  };
}
