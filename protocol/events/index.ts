// The public face of protocol/events/: what other folders import from it (DESIGN.md, Layout).
export {
  eventCatalog,
  eventDefinition,
  eventDefinitions,
  checkEventContent,
  isDurable,
  type CatalogEntry,
  type CatalogEventName,
  type EventContent,
  type EventName,
  type ProtoEventName,
} from './catalog.js';
export type { Audience, Durability, EventDefinition } from './eventFields.js';
export { BuildStatus, EvaluationPhase, buildStatuses, evaluationPhases } from './buildEvents.js';
export { TaskActionKind, TaskActionUpdateContent } from './resourceEvents.js';
export { StreamLaggedContent, StreamOpenContent, WebhookPingContent } from './runtimeEvents.js';
export { EventGlob, EventGlobs, compileEventGlobs, eventMatcher, splitEventGlobs, type EventMatcher } from './eventGlob.js';
export { EventScope } from './eventScope.js';
export { Envelope, eventTime, renderEnvelope } from './envelope.js';
export { SIGNATURE_HEADER, signBody, verifySignature } from './signature.js';
