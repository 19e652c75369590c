// The route table: binary cache paths first (the hot ones), then /api/v1.
import type { Principal, Services } from '../services/index.js';
import { RouteTable, Router } from './router.js';
import { healthRoutes } from './api/v1/health.js';
import { serverConfigRoutes } from './api/v1/serverConfig.js';
import { adminActorsRoutes } from './api/v1/adminActors.js';
import { adminGcRoutes } from './api/v1/adminGc.js';
import { adminAccountsRoutes } from './api/v1/adminAccounts.js';
import { authRoutes } from './api/v1/auth.js';
import { oidcRoutes } from './api/v1/oidcAuth.js';
import { userRoutes } from './api/v1/user.js';
import { userKeysRoutes } from './api/v1/userKeys.js';
import { scimRoutes } from './scim/users.js';
import { membersRoutes } from './api/v1/members.js';
import { invitationsRoutes } from './api/v1/invitations.js';
import { subscriptionsRoutes } from './api/v1/subscriptions.js';
import { workersRoutes } from './api/v1/workers.js';
import { orgsRoutes } from './api/v1/orgs.js';
import { projectsRoutes } from './api/v1/projects.js';
import { tasksRoutes } from './api/v1/tasks.js';
import { serversRoutes } from './api/v1/servers.js';
import { narUploadRoutes } from './api/v1/narUploads.js';
import { binaryCacheRoutes } from './cache/routes.js';
import { cachesRoutes } from './api/v1/caches.js';
import { cacheNarsRoutes } from './api/v1/cacheNars.js';
import { cachePinsRoutes } from './api/v1/cachePins.js';
import { cacheUpstreamsRoutes } from './api/v1/cacheUpstreams.js';
import { webhooksRoutes } from './api/v1/webhooks.js';
import { gitHostHooksRoutes } from './api/v1/gitHostHooks.js';
import { taskActionsRoutes } from './api/v1/taskActions.js';
import { eventRoutes } from './api/v1/events.js';
import { connectedWorkersRoutes } from './api/v1/connectedWorkers.js';
import { evaluationsRoutes } from './api/v1/evaluations.js';
import { buildsRoutes } from './api/v1/builds.js';
import { directBuildsRoutes } from './api/v1/directBuilds.js';
import { sourceUploadRoutes } from './api/v1/sourceUploads.js';
import { commitsRoutes } from './api/v1/commits.js';
import { closuresRoutes } from './api/v1/closures.js';
import { frontendRoutes } from './frontend/frontendRoutes.js';
import { metricsRoutes } from './api/v1/metrics.js';

/** The whole route table: every resource's routes under /api/v1, the binary cache at the root. Each route file takes the router and the services. */
export function buildRoutes(services: Services): RouteTable<Principal> {
  const table = new RouteTable<Principal>();
  const root = () => new Router<Principal>(table);
  // First: the table is matched in order, and the cache paths are the hot ones (narinfo requests).
  binaryCacheRoutes(root(), services);
  const api = root().scope('/api/v1');
  healthRoutes(api, services);
  metricsRoutes(api, root(), services);
  serverConfigRoutes(api, services);
  adminActorsRoutes(api, services);
  adminGcRoutes(api, services);
  adminAccountsRoutes(api, services);
  authRoutes(api, services);
  oidcRoutes(api, services);
  userRoutes(api, services);
  userKeysRoutes(api, services);
  scimRoutes(root(), services);
  // The single-segment /projects/{project}/… routes come before /projects/{org}/{project}.
  membersRoutes(api, services);
  invitationsRoutes(api, services);
  subscriptionsRoutes(api, services);
  workersRoutes(api, services);
  connectedWorkersRoutes(api, services);
  webhooksRoutes(api, services);
  gitHostHooksRoutes(api, services);
  taskActionsRoutes(api, services);
  eventRoutes(api);
  orgsRoutes(api, services);
  projectsRoutes(api, services);
  evaluationsRoutes(api, services);
  tasksRoutes(api, services);
  serversRoutes(api, services);
  directBuildsRoutes(api, services);
  buildsRoutes(api, services);
  sourceUploadRoutes(root(), services);
  commitsRoutes(api, services);
  closuresRoutes(api, services);
  cachesRoutes(api, services);
  cacheNarsRoutes(api, services);
  cachePinsRoutes(api, services);
  cacheUpstreamsRoutes(api, services);
  narUploadRoutes(api, services);
  // Last: the UI answers only what no route above owns.
  frontendRoutes(table, services.config);
  return table;
}
