// The `kiln worker` process: /proto client, Nix driver and job runner (docs/worker.md).
export { startWorker, type RunningWorker, type StartWorkerOptions } from './worker.js';
export { insecureListenerProblem, insecureTransportProblem } from './transportSecurity.js';
export { workerSettings, type WorkerSettings } from './settings.js';
export { backoffDelayMs, BACKOFF_BASE_MS, BACKOFF_CAP_MS } from './backoff.js';
export { classifyBuildFailure, classifyEvalFailure, type NixOutcome } from './failureClassifier.js';
export { parseNixLogLine, type NixLogEvent } from './nixLogLines.js';
export { LogLimiter, type LogCaps } from './logLimiter.js';
export { selectAttributesExpression, derivationsOfFlake, nixString } from './flakeExpressions.js';
export { dependencyOrder, toDerivationNode } from './derivationGraph.js';
export { rechunk } from './narPusher.js';
export { dumpNar } from './narDump.js';
