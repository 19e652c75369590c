// The public face of storage/events/: what other folders import from it (DESIGN.md, Layout).
export { createEvents, type Emit, type Events, type EventsOptions } from './events.js';
export { writeOutbox, writeRedelivery, type DeliveryTarget, type PreparedEvent, type WriteOutboxOptions, type WrittenDelivery } from './outbox.js';
export { DELIVERY_QUEUE, JOB_ATTEMPTS, bossDatabase, enqueueDeliveries, ensureDeliveryQueue, type DeliveryJob, type DueAttempt, type DueDelivery } from './deliveryJobs.js';
export {
  INTERRUPTED,
  claimAttempts,
  deleteExpired,
  deliveryState,
  dueRetries,
  recordAttempts,
  recoverInterrupted,
  type AttemptOutcomeRow,
  type AttemptStatus,
  type ClaimedRow,
  type OwnAttempts,
  type RecoveredRow,
} from './deliveryLedger.js';
export { findDelivery, listDeliveries, type AttemptRow, type DeliveryQuery, type DeliveryRow } from './deliveryHistory.js';
export {
  deleteWebhook,
  findWebhook,
  insertWebhook,
  listWebhooks,
  replaceWebhookSecret,
  updateWebhook,
  type NewWebhook,
  type WebhookPatch,
  type WebhookRow,
  type WebhookScope,
} from './webhookRows.js';
export {
  deleteTaskAction,
  findTaskAction,
  insertTaskAction,
  listTaskActions,
  replaceTaskActionSecret,
  updateTaskAction,
  type NewTaskAction,
  type TaskActionKind,
  type TaskActionPatch,
  type TaskActionRow,
  type LastOpenPrRun,
} from './taskActionRows.js';
