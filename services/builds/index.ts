// The public face of services/builds/: what other domains and folders import from it.
export { buildDataServices, type BuildDataServices } from './buildData.js';
export { BuildLogFeed } from './buildLogFeed.js';
export { BuildLogs } from './buildLogs.js';
export { deleteOldBuildSamples } from './buildStatistics.js';
export { buildProgressReporter } from './buildProgress.js';
export { BuildScheduler, type SchedulerTicker } from './buildScheduler.js';
export type { ChangeJobs } from './changeJobs.js';
export { type BuildView, buildViewsService, type BuildViewsService } from './buildViews.js';
export { commitsService, type CommitsService } from './commits.js';
export { directBuildsService, type DirectBuildsService } from './directBuilds.js';
export { effectiveKeep, evaluationPruner, pruneTaskEvaluations } from './evaluationRetention.js';
export { evaluationsService, type EvaluationsService } from './evaluations.js';
export type { RunningScheduler } from './schedulerPort.js';
export { sourceUploadsService, type SourceUploadsService } from './sourceUploads.js';
export { runGraphConsistencyCheck, type GraphConsistencyReport } from './graphConsistency.js';
export { insertEvaluation, type TriggerOf } from './evaluationInsert.js';
export { parkForApproval } from './evaluationPhases.js';
export { abortClosedPullRequest, stopSuperseded, supersedeOlder } from './evaluationSupersede.js';
