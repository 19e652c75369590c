// The public face of services/builds/: what other domains and folders import from it.
export { BuildLogs, readBuildLog } from './buildLogs.js';
export { BuildScheduler, intervalTicker, type BuildSchedulerDeps, type SchedulerSettings, type SchedulerTicker } from './buildScheduler.js';
export { evaluationsService, type EvaluationsDeps, type EvaluationsService, type EvaluationView } from './evaluations.js';
export { buildViewsService, type BuildView, type BuildViewsService, type EntryPointView } from './buildViews.js';
export { BuildLogFeed, LIVE_LOG_POLL_MS } from './buildLogFeed.js';
export { buildDataServices, type BuildDataDeps, type BuildDataServices } from './buildData.js';
export type { BuildGraph, BuildGraphNode } from './buildGraphs.js';
export { type ClosureGraph, type ClosureNode, CLOSURE_NODE_LIMIT } from './closures.js';
export { parseBuildProducts, type BuildProduct } from './buildProducts.js';
export { directBuildsService, DIRECT_TASK, type DirectBuildRequest, type DirectBuildsDeps, type DirectBuildsService } from './directBuilds.js';
export { sourceUploadsService, sourceFormat, SOURCE_UPLOAD_TTL_SECS, type SourceUploadView, type SourceUploadsService } from './sourceUploads.js';
export { commitsService, type CommitView, type CommitsService } from './commits.js';
export { pruneTaskEvaluations, evaluationPruner, effectiveKeep } from './evaluationRetention.js';
export { buildProgressReporter, emitBuildProgress, type BuildProgress, type BuildProgressReporter } from './buildProgress.js';
