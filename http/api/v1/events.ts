// GET /events/catalog, and a plain answer for the event WebSocket paths when they are fetched
// without a WebSocket upgrade (uWS hands such requests to the router).
import { ApiError, eventCatalog } from '../../../protocol/index.js';
import type { Principal } from '../../../services/index.js';
import type { Router } from '../../router.js';

const WEBSOCKET_PATHS = ['/metrics/events', '/tasks/:project/:task/live', '/evals/:evaluation/live', '/builds/:build/live', '/board/live', '/board/cache/live', '/admin/actors/live'];

export function eventRoutes(r: Router<Principal>): void {
  r.get('/events/catalog', () => eventCatalog());
  for (const path of WEBSOCKET_PATHS) {
    r.get(path, () => {
      throw new ApiError('websocket_required', 'this path is a WebSocket: connect with an Upgrade: websocket request');
    });
  }
}
