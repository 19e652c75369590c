import type { Config } from '../config/index.js';
import type { SupervisedActor, Supervisor } from '../supervisors/index.js';
import type { uploadBudgetMachine } from '../actors/index.js';
import type { Database } from '../storage/index.js';
import type { Principal } from '../services/index.js';
import { RouteTable, Router } from './router.js';
import { healthRoutes } from './api/v1/health.js';
import { serverConfigRoutes } from './api/v1/serverConfig.js';
import { adminActorsRoutes } from './api/v1/adminActors.js';

export interface RouteDeps {
  config: Config;
  db: Database;
  root: Supervisor;
  uploadBudget: SupervisedActor<typeof uploadBudgetMachine>;
  startedAt: Date;
  version: string;
}

/** The whole route table: every resource's routes under /api/v1, the binary cache at the root. */
export function buildRoutes(deps: RouteDeps): RouteTable<Principal> {
  const table = new RouteTable<Principal>();
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
  return table;
}
