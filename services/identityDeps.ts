import type { Config, Logger } from '../config/index.js';
import type { Sql } from '../storage/index.js';
import type { Clock } from './clock.js';

/** What the identity services (accounts, sessions, keys, e-mail, OIDC, SCIM) are built from. */
export interface IdentityDeps {
  /** the web pool */
  sql: Sql;
  config: Config;
  log: Logger;
  clock: Clock;
}
