export { startHttpServer, type HttpServer, type HttpServerOptions } from './server.js';
export { Router, RouteTable, type AuthMode, type BodyMode, type Handler, type Method, type RouteOptions } from './router.js';
export { Req } from './request.js';
export { bytesReply, emptyReply, errorReply, isReply, jsonReply, streamReply, type Reply } from './reply.js';
export { CidrSet, clientAddress, normalizeAddress } from './clientAddress.js';
export { buildRoutes, type RouteDeps } from './routes.js';
export { createAuthenticator, type Authenticator } from './authenticate.js';
export { authRateLimits, rateLimited, type RatePolicy } from './rateLimit.js';
export { eventSockets, type EventSockets, type EventSocketsOptions } from './live/eventSockets.js';
