// The public face of services/workers/: what other domains and folders import from it.
export { workerRegistrationsService, type OutboundWorkerTarget, type WorkerRegistrationView } from './workerRegistrations.js';
export { rankWorkers, type ScoringPolicy } from './workerRanking.js';
export { type ConnectedWorker, WorkerConnections, type WorkerListener, type WorkerEventContent, type WorkerEventEmitter, type WorkerLink, type WorkerView } from './workerConnections.js';
export { WorkerNars, type WorkerNarsDeps } from './workerNars.js';
export { registerServerInstance, type ServerInstance } from './serverInstance.js';
export { workerAuth, type WorkerAuth } from './workerAuth.js';
