// The route table: binary cache paths first (the hot ones), then /api/v1.
import type { Config } from '../config/index.js';
import type { Supervisor } from '../supervisors/index.js';
import type { Database, NarStorage, RateLimiter } from '../storage/index.js';
import type { AccessServices, BinaryCacheAccess, CacheServices, EventSystem, IdentityServices, NarUploadService, Principal, WorkerConnections, EvaluationsService, BuildViewsService, BuildDataServices } from '../services/index.js';
import { RouteTable, Router } from './router.js';
import { healthRoutes } from './api/v1/health.js';
import { serverConfigRoutes } from './api/v1/serverConfig.js';
import { adminActorsRoutes } from './api/v1/adminActors.js';
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
import { binaryCacheRoutes, noCacheExtras, upstreamExtras, type CacheExtras, type CacheRouteDeps } from './cache/routes.js';
import { cachesRoutes } from './api/v1/caches.js';
import { cacheNarsRoutes } from './api/v1/cacheNars.js';
import { cacheUpstreamsRoutes } from './api/v1/cacheUpstreams.js';
import { CidrSet } from './clientAddress.js';
import { webhooksRoutes } from './api/v1/webhooks.js';
import { taskActionsRoutes } from './api/v1/taskActions.js';
import { eventRoutes } from './api/v1/events.js';
import { connectedWorkersRoutes } from './api/v1/connectedWorkers.js';
import { evaluationsRoutes } from './api/v1/evaluations.js';
import { buildsRoutes } from './api/v1/builds.js';
import { directBuildsRoutes } from './api/v1/directBuilds.js';
import { sourceUploadRoutes } from './api/v1/sourceUploads.js';
import { commitsRoutes } from './api/v1/commits.js';
import type { CommitsService, DirectBuildsService, SourceUploadsService } from '../services/index.js';
import { closuresRoutes } from './api/v1/closures.js';
import { frontendRoutes } from './frontend/frontendRoutes.js';

export interface RouteDeps {
  config: Config;
  db: Database;
  root: Supervisor;
  startedAt: Date;
  version: string;
  identity: IdentityServices;
  /** token buckets of the auth endpoints and the binary cache routes */
  rateLimiter: RateLimiter;
  /** organizations, projects, tasks, servers, members, invitations, subscriptions, worker tokens */
  access: AccessServices;
  /** the binary cache's storage: reads, uploads, hot cache */
  nars: NarStorage;
  /** who may read and write a cache at /cache/{cache} (HTTP Basic) */
  binaryCache: BinaryCacheAccess;
  narUploads: NarUploadService;
  /** caches, their NARs (management API), upstreams and storage limits */
  caches: CacheServices;
  /** log/{drv} and debuginfo/{build_id}; 404 until builds provide them */
  cacheExtras?: CacheExtras;
  /** watches serve/ directory archives being packed (tests) */
  archiveProgress?: CacheRouteDeps['archiveProgress'];
  /** webhooks and task actions (the event system) */
  events: Pick<EventSystem, 'webhooks' | 'taskActions'>;
  /** workers connected over /proto (GET /workers) */
  workers?: WorkerConnections;
  /** evaluations and the read side of builds */
  builds?: { evaluations: EvaluationsService; views: BuildViewsService; data?: BuildDataServices };
  /** direct builds, source uploads and commits (docs/builds.md) */
  buildRequests?: { direct: DirectBuildsService; sources: SourceUploadsService; commits: CommitsService };
}

/** The whole route table: every resource's routes under /api/v1, the binary cache at the root. */
export function buildRoutes(deps: RouteDeps): RouteTable<Principal> {
  const table = new RouteTable<Principal>();
  // First: the table is matched in order, and the cache paths are the hot ones (narinfo requests).
  binaryCacheRoutes(new Router<Principal>(table), {
    access: deps.binaryCache,
    nars: deps.nars,
    uploads: deps.narUploads,
    rateLimiter: deps.rateLimiter,
    config: deps.config,
    localIps: new CidrSet(deps.config['http.localIps']),
    extras: upstreamExtras(deps.caches.upstreams, deps.cacheExtras ?? noCacheExtras),
    upstreams: deps.caches.upstreams,
    traffic: deps.caches.traffic,
    ...(deps.archiveProgress ? { archiveProgress: deps.archiveProgress } : {}),
  });
  const api = new Router<Principal>(table).scope('/api/v1');
  healthRoutes(api, {
    databaseReady: async () => {
      await deps.db.web`select 1`;
    },
    startedAt: deps.startedAt,
    version: deps.version,
  });
  serverConfigRoutes(api, deps.config);
  adminActorsRoutes(api, deps.root);
  authRoutes(api, deps);
  oidcRoutes(api, deps.identity, deps.config);
  userRoutes(api, deps.identity);
  userKeysRoutes(api, deps.identity);
  scimRoutes(new Router<Principal>(table), deps.identity);
  // The single-segment /projects/{project}/… routes come before /projects/{org}/{project}.
  membersRoutes(api, deps.access);
  invitationsRoutes(api, deps.access);
  subscriptionsRoutes(api, deps.access);
  workersRoutes(api, deps.access);
  if (deps.workers) connectedWorkersRoutes(api, deps.workers);
  webhooksRoutes(api, deps.events.webhooks);
  taskActionsRoutes(api, deps.events.taskActions);
  eventRoutes(api);
  orgsRoutes(api, deps.access);
  projectsRoutes(api, deps.access);
  if (deps.builds) evaluationsRoutes(api, deps.builds.evaluations, deps.builds.views);
  tasksRoutes(api, deps.access);
  serversRoutes(api, deps.access);
  if (deps.buildRequests) directBuildsRoutes(api, deps.buildRequests.direct);
  if (deps.builds) buildsRoutes(api, deps.builds.views, deps.builds.data);
  if (deps.buildRequests) sourceUploadRoutes(api, new Router<Principal>(table), deps.buildRequests.sources, deps.config['http.maxSourceUploadSize']);
  if (deps.buildRequests) commitsRoutes(api, deps.buildRequests.commits);
  if (deps.builds?.data) closuresRoutes(api, deps.builds.data);
  cachesRoutes(api, deps.caches);
  cacheNarsRoutes(api, deps.caches);
  cacheUpstreamsRoutes(api, deps.caches);
  narUploadRoutes(api, { uploads: deps.narUploads, config: deps.config });
  // Last: the UI answers only what no route above owns.
  frontendRoutes(table, deps.config);
  return table;
}
