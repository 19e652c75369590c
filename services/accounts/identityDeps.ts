// What the identity services are built from.
import type { Config, Logger } from '../../config/index.js';
import type { Events, Sql } from '../../storage/index.js';
import type { Clock } from '../../supervisors/index.js';

/** What the identity services (accounts, sessions, keys, e-mail, OIDC, SCIM) are built from. */
export interface IdentityDeps {
  /** the web pool */
  sql: Sql;
  config: Config;
  log: Logger;
  clock: Clock;
  /** account activity (login.success, api_key.create, session.revoke, user.*) is emitted here */
  events: Events;
}
