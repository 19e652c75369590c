// The public face of protocol/trace/: the ids of stage spans (docs/metrics.md, "Stage traces").
export { jobRootSpan, childSpan, newTraceRoot, type SpanIds } from './jobTrace.js';
