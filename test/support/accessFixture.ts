// The access services on a fresh test database, without HTTP: a movable clock, principals made
// directly (as the authenticator would), and a record of the subscription hook's calls.
import type { Test } from 'tap';
import pino from 'pino';
import { loadConfig, type OptionPath } from '../../config/index.js';
import { createAccessServices, type AccessDeps, type AccessServices, type KeyUser, type SessionUser } from '../../services/index.js';
import { secretBoxWithKey } from '../../storage/index.js';
import type { Permission } from '../../protocol/index.js';
import { testDatabase } from './db.js';
import { testEvents } from './testEvents.js';
import type { BusEvent } from '../../storage/index.js';
import type { Sql } from 'postgres';

export interface MovableClock {
  now(): Date;
  advance(ms: number): void;
}

export interface AccessFixture {
  sql: Sql;
  deps: AccessDeps;
  services: AccessServices;
  clock: MovableClock;
  /** project ids passed to onSubscriptionApproved, in order */
  approved: string[];
  /** events published after their transaction committed, in order */
  published: BusEvent[];
  user(username: string, opts?: { superuser?: boolean }): Promise<SessionUser>;
  key(owner: SessionUser, permissions: Permission[], pins?: { projectId?: string; cacheId?: string }): KeyUser;
  cache(name: string, opts?: { owner?: SessionUser; public?: boolean }): Promise<string>;
}

export async function accessFixture(t: Pick<Test, 'teardown'>, overrides: Partial<Record<OptionPath, unknown>> = {}): Promise<AccessFixture> {
  const db = await testDatabase(t);
  const { sql } = db;
  const { events, published } = await testEvents(t, db);
  let now = Date.parse('2030-01-01T00:00:00Z');
  const clock: MovableClock = { now: () => new Date(now), advance: (ms) => void (now += ms) };
  const approved: string[] = [];
  const config = loadConfig({ scope: 'server', env: {}, overrides: { useTls: false, 'projects.allowLocalRepositories': true, ...overrides } }).values;
  const deps: AccessDeps = {
    sql, config, log: pino({ level: 'silent' }), clock, secretBox: secretBoxWithKey(Buffer.alloc(32, 7)), events,
    onSubscriptionApproved: (projectId) => void approved.push(projectId),
  };
  return {
    sql, deps, services: createAccessServices(deps), clock, approved, published,
    async user(username, opts = {}) {
      const [row] = await sql<{ id: string }[]>`insert into users (username, superuser) values (${username}, ${opts.superuser ?? false}) returning id`;
      return { kind: 'user', via: 'session', sessionId: `session-${username}`, userId: row!.id, username, superuser: opts.superuser ?? false };
    },
    key(owner, permissions, pins = {}) {
      return {
        kind: 'user', via: 'key', keyId: `key-${owner.username}`, userId: owner.userId, username: owner.username, superuser: owner.superuser,
        permissions: new Set(permissions), projectId: pins.projectId ?? null, cacheId: pins.cacheId ?? null,
      };
    },
    async cache(name, opts = {}) {
      const [row] = await sql<{ id: string }[]>`
        insert into caches (name, public, owner_id, key_name, public_key, secret_key)
        values (${name}, ${opts.public ?? false}, ${opts.owner?.userId ?? null}, ${`test-${name}-1`}, ${Buffer.alloc(32, 1)}, ${Buffer.alloc(64, 2)})
        returning id`;
      return row!.id;
    },
  };
}
