// What the cache services are built from.
import type { Sql } from 'postgres';
import type { Config, Logger } from '../../config/index.js';
import type { Events, NarStorage, SecretBox } from '../../storage/index.js';

/** What the cache services (caches, NAR management, upstreams) are built from. */
export interface CacheDeps {
  /** the web pool (database.web.*) */
  sql: Sql;
  config: Config;
  log: Logger;
  secretBox: SecretBox;
  /** cache.* events: durable ones in the transaction of the change (docs/caches.md, "Events") */
  events: Events;
  /** the binary cache's storage: deleting a path goes through it, so this process forgets it at once */
  nars: NarStorage;
}
