// What the access services (organizations, projects, caches, members) are built from.
import type { LookupAddress } from 'node:dns';
import type { Sql } from 'postgres';
import type { Config, Logger } from '../../config/index.js';
import type { Events, SecretBox } from '../../storage/index.js';
import type { Clock } from '../../supervisors/index.js';

/** What the access services (organizations … worker registrations) are built from. */
export interface AccessDeps {
  sql: Sql;
  config: Config;
  log: Logger;
  clock: Clock;
  secretBox: SecretBox;
  /** every change emits its event in its own transaction (docs/events.md) */
  events: Events;
  /**
   * Called after a subscription of a project (or of its organization) became active, once per
   * project: the scheduler re-queues evaluations that wait for a writable cache here.
   */
  onSubscriptionApproved(projectId: string): void | Promise<void>;
  /** a name's addresses for the outbound checks of build servers (default: the system resolver); tests stand in a changing DNS */
  resolve?: (name: string) => Promise<LookupAddress[]>;
}
