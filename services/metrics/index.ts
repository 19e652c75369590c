// The public face of services/metrics/: the series read at scrape time (docs/metrics.md).
export { registerServerMetrics } from './serverMetrics.js';
