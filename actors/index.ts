// The public face of actors/: what other folders import from it (DESIGN.md, Layout).
export {
  uploadBudgetMachine,
  summarizeUploadBudget,
  type UploadBudgetContext,
  type UploadBudgetEvent,
  type UploadBudgetInput,
  type UploadBudgetSnapshot,
} from './uploadBudget.js';
export {
  acquireUpload,
  type AcquireUploadOptions,
  type UploadBudgetRef,
  type UploadPermit,
} from './uploadPermit.js';
export { UploadLimits, parseUploadLimits, sizeClass, type SizeClass, type UploadRequest } from './uploadAdmission.js';
export {
  createWebhookDeliveryMachine,
  decideDelivery,
  summarizeDelivery,
  type DeliveryContext,
  type DeliveryDecision,
  type DeliveryEffects,
  type DeliveryInput,
  type DeliveryOutcome,
  type DeliveryRecord,
  type DeliveryRequest,
  type DeliveryVerdict,
  type SendResult,
  type WebhookDeliveryMachine,
  type WebhookDeliverySnapshot,
} from './webhookDelivery.js';
export { DELIVERY_ATTEMPTS, RETRY_DELAYS_MS, checkDeliveryPolicy, defaultDeliveryPolicy, retryDelayMs, type DeliveryPolicy } from './deliveryBackoff.js';
export { workerJobMachine, summarizeWorkerJob, type WorkerJobContext, type WorkerJobEvent, type WorkerJobInput, type WorkerJobState } from './workerJob.js';
export {
  workerConnectionMachine,
  summarizeWorkerConnection,
  type WorkerConnectionContext,
  type WorkerConnectionEvent,
  type WorkerConnectionInput,
  type WorkerConnectionState,
} from './workerConnection.js';
export {
  buildLifecycle,
  evaluationLifecycle,
  buildMove,
  evaluationMove,
  decideBuildOutcome,
  type BuildEvent,
  type BuildContext,
  type EvaluationEvent,
  type EvaluationContext,
} from './lifecycles.js';
