// The public face of services/metrics/: the series read at scrape time and the stored metrics (docs/metrics.md).
export { registerServerMetrics } from './serverMetrics.js';
export { flushTraffic, rollUpAndPrune } from './trafficRecorder.js';
export { flushPhases } from './phaseRecorder.js';
export { cacheMetricsService, type CacheMetricsService } from './cacheMetrics.js';
export { startOtlpPush } from './otlpPushLoader.js';
export { sampleWorkers } from './workerSamples.js';
export { sampleInstance, instanceWindowService, type InstanceWindowService } from './instanceWindow.js';
export { workerSampleSeriesService, type WorkerSampleSeriesService } from './workerSampleSeries.js';
export { projectSeriesService, type ProjectSeriesService } from './projectSeries.js';
export { phaseSeriesService, type PhaseSeriesService } from './phaseSeries.js';
export { sampleRollupSeriesService, type SampleRollupSeriesService } from './sampleRollupSeries.js';
