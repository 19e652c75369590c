// The public face of http/: what other folders import from it (DESIGN.md, Layout).
export { startHttpServer, type HttpServer, type HttpServerOptions } from './server.js';
export { Router, RouteTable, type AuthMode, type BodyMode, type Handler, type Lane, type Method, type RouteOptions } from './router.js';
export { Req } from './request.js';
export { RATE_WINDOW_MS, systemTimerClock, type MinimumBodyRate, type TimerClock } from './bodyRate.js';
export { bytesReply, emptyReply, isReply, jsonReply, streamReply, type Reply } from './reply.js';
export { CidrSet, clientAddress, normalizeAddress } from './clientAddress.js';
export { buildRoutes } from './routes.js';
export { requestAuthenticator, type Authenticate } from './authenticate.js';
export { authRateLimits, rateLimited, type RatePolicy } from './rateLimit.js';
export { eventSockets, type EventSockets, type EventSocketsOptions } from './live/eventSockets.js';
export { protoRoute, type ProtoRoute, type ProtoRouteOptions } from './proto/protoRoute.js';
export { startServingThreads, type ServingThreads } from './serving/servingThreads.js';
export { threadNarServices } from './serving/narGrants.js';
export { threadAnswerCounts } from './serving/threadAnswerCounts.js';
export { anonymousNarinfo } from './cache/narinfo.js';
export { freePort } from './serving/reusablePort.js';
export { checkedTlsFiles } from './serving/tlsFiles.js';
export { startOutboundWorkers, type OutboundWorkers, type OutboundWorkersOptions } from './proto/outboundWorkers.js';
