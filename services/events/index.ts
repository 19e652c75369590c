// The public face of services/events/: what other domains and folders import from it.
export { openEventSystem, type EventSystem, type EventSystemDeps, type EventSystemOptions } from './eventSystem.js';
export { checkLiveRequest, eventStreamsService, unknownEvaluations, type EventStreams, type LiveFeed, type LiveRequest, type LiveResolvers } from './eventStreams.js';
export { webhooksService, type WebhookView, type WebhookWithSecret, type WebhooksDeps, type WebhooksService } from './webhooks.js';
export { accessWebhookAuthorizer, type ResolvedWebhookScope, type WebhookAuthorizer, type WebhookScopeRef } from './webhookScopes.js';
export { taskActionsService, type TaskActionView, type TaskActionWithSecret, type TaskActionsService } from './taskActions.js';
export type { DeliveryDetail, DeliveryPage, DeliveryView } from './deliveryViews.js';
export { startDeliveryEngine, type DeliveryEngine, type DeliveryEngineOptions, type DeliverySenders } from './deliveryEngine.js';
export type { TaskActionReport } from './deliveryRequests.js';
export { createWebRequestSender, type SendOutcome, type WebRequest, type WebRequestSender, type WebRequestSenderOptions } from './webRequest.js';
