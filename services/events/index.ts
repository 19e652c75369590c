// The public face of services/events/: what other domains and folders import from it.
export { checkLiveRequest, type EventStreams, eventStreamsService, type LiveFeed, type LiveRequest } from './eventStreams.js';
export { type EventSystem, type EventSystemOptions, openEventSystem } from './eventSystem.js';
export type { WebhookScopeRef } from './webhookScopes.js';
export { createWebRequestSender } from './webRequest.js';
