// The ids that link a job's stage spans across the server and the worker (docs/metrics.md, "Stage
// traces"): both sides derive them from the job id they share, so no message carries them. The
// server's span of the job is the trace's root; the worker's spans hang below it.
import { createHash, randomBytes } from 'node:crypto';

export interface SpanIds {
  /** 32 hex digits, as W3C trace context and OTLP spell a trace id */
  traceId: string;
  /** 16 hex digits */
  spanId: string;
  parentSpanId: string | null;
}

const hex = (text: string, digits: number) => createHash('sha256').update(text).digest('hex').slice(0, digits);

/** The trace of job `jobId` and its root span, the server's span of the job. */
export function jobRootSpan(jobId: string): SpanIds {
  return { traceId: hex(`kiln-trace:${jobId}`, 32), spanId: hex(`kiln-span:${jobId}`, 16), parentSpanId: null };
}

/** A new span below `parent` in the same trace. */
export function childSpan(parent: SpanIds): SpanIds {
  return { traceId: parent.traceId, spanId: randomBytes(8).toString('hex'), parentSpanId: parent.spanId };
}

/** A new trace of its own (an ingest or an upstream fetch that no job asked for). */
export function newTraceRoot(): SpanIds {
  return { traceId: randomBytes(16).toString('hex'), spanId: randomBytes(8).toString('hex'), parentSpanId: null };
}
