// The public face of services/workers/: what other domains and folders import from it.
export { openServerInstance, type ServerInstance } from './serverInstance.js';
export { BuildServerPasses } from './buildServerPasses.js';
export { createWorkerAuth, type WorkerAuth } from './workerAuth.js';
export { type ConnectedWorker, WorkerConnections, type WorkerListener } from './workerConnections.js';
export { WorkerNars } from './workerNars.js';
export { bestWorker, type ScoringPolicy } from './workerRanking.js';
export { type OutboundWorkerTarget, workerRegistrationsService } from './workerRegistrations.js';
export { deleteOldWorkerConnections } from './connectionRetention.js';
