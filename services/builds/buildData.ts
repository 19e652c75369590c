// The build data endpoints' services (docs/builds.md): streamed logs, the dependency graph,
// closures and build products. Each is authorised like GET /builds/{id} or GET /evals/{id}.
import type { Sql } from 'postgres';
import type { NarStorage } from '../../storage/index.js';
import type { BuildLogFeed } from './buildLogFeed.js';
import type { BuildLogs } from './buildLogs.js';
import { buildGraphsService } from './buildGraphs.js';
import { buildLogStreams } from './buildLogStreams.js';
import { buildProductsService } from './buildProducts.js';
import type { BuildViewsService } from './buildViews.js';
import { closuresService } from './closures.js';
import type { EvaluationsService } from './evaluations.js';

export interface BuildDataDeps {
  sql: Sql;
  nars: Pick<NarStorage, 'reads' | 'blobs'>;
  evaluations: Pick<EvaluationsService, 'visible'>;
  views: Pick<BuildViewsService, 'build'>;
  feed: BuildLogFeed;
  /** the logs this process receives over /proto, for the not yet stored tail of a live log */
  logs?: Pick<BuildLogs, 'tail'>;
}

export function buildDataServices(deps: BuildDataDeps) {
  const { sql, nars, evaluations, views } = deps;
  return {
    logStreams: buildLogStreams(deps),
    graphs: buildGraphsService(sql, views),
    closures: closuresService(sql, evaluations, views),
    products: buildProductsService(sql, nars, evaluations, views),
  };
}
export type BuildDataServices = ReturnType<typeof buildDataServices>;
