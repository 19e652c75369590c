// Stage traces (log.traceDir, worker.log.traceDir; docs/metrics.md "Stage traces"): every closed
// stage span as one JSON line in a file of this process's own, `kiln-<process>-<host>-<pid>.jsonl`
// under the directory, so processes sharing a directory never interleave their lines. Writes are
// buffered by a stream: a span costs an object and a string, nothing waits for the disk. A null
// directory gives a tracer that writes nothing. It sits next to the logger: a trace file is a log.
import { createWriteStream, mkdirSync, type WriteStream } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { childSpan, type SpanIds } from '../protocol/index.js';

export type SpanAttributes = Record<string, string | number | boolean | null>;
export type SpanStatus = 'ok' | 'error';

/** Ends a started span: its status and any attributes learnt meanwhile. */
export type EndSpan = (status?: SpanStatus, attributes?: SpanAttributes) => void;

export interface StageTracer {
  readonly enabled: boolean;
  /** the file spans go to; null when disabled */
  readonly file: string | null;
  /** Starts the span `ids` named `name`; it is written when ended. */
  start(name: string, ids: SpanIds, attributes?: SpanAttributes): EndSpan;
  /** Starts a child span of `parent` (new span id, same trace). */
  child(name: string, parent: SpanIds, attributes?: SpanAttributes): { ids: SpanIds; end: EndSpan };
  close(): Promise<void>;
}

const noop: EndSpan = () => undefined;

export const disabledTracer: StageTracer = {
  enabled: false,
  file: null,
  start: () => noop,
  child: (_name, parent) => ({ ids: childSpan(parent), end: noop }),
  close: async () => undefined,
};

/** A tracer writing to `dir` (made if missing, owner-only), or the disabled one for null. */
export function openStageTracer(dir: string | null, processKind: 'server' | 'worker', now: () => number = Date.now): StageTracer {
  if (dir === null) return disabledTracer;
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, `kiln-${processKind}-${hostname().replace(/[^A-Za-z0-9._-]/g, '_')}-${process.pid}.jsonl`);
  const stream: WriteStream = createWriteStream(file, { flags: 'a', mode: 0o600 });
  // A full disk or a removed directory must not stop kiln: the trace is lost, the work goes on.
  let failed = false;
  stream.on('error', () => {
    failed = true;
  });
  const start = (name: string, ids: SpanIds, attributes: SpanAttributes = {}): EndSpan => {
    const startedAt = now();
    let ended = false;
    return (status = 'ok', more = {}) => {
      if (ended || failed) return;
      ended = true;
      const endedAt = now();
      stream.write(`${JSON.stringify({
        trace_id: ids.traceId, span_id: ids.spanId, parent_span_id: ids.parentSpanId, name, process: processKind, pid: process.pid,
        start: new Date(startedAt).toISOString(), end: new Date(endedAt).toISOString(), duration_ms: endedAt - startedAt, status,
        attributes: { ...attributes, ...more },
      })}\n`);
    };
  };
  return {
    enabled: true,
    file,
    start,
    child(name, parent, attributes) {
      const ids = childSpan(parent);
      return { ids, end: start(name, ids, attributes) };
    },
    close: () => new Promise<void>((resolve) => stream.end(() => resolve())),
  };
}
