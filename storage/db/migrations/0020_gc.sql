-- Garbage collection (issue 20, docs/gc.md): per-cache retention settings, pins, the live set of
-- the last collection pass, orphaned derivations and the record of passes and deep rounds.

-- Per-cache overrides of gc.narTtlHours: null follows the instance; keep_forever exempts the
-- cache's paths from the TTL (storage limits still apply).
alter table caches
  add column nar_ttl_hours integer check (nar_ttl_hours is null or nar_ttl_hours >= 0),
  add column keep_forever boolean not null default false;

-- A pinned path and its runtime closure (as the cache holds it) are never collected from the cache.
create table cache_pins (
  cache_id uuid not null references caches on delete cascade,
  hash_part text not null check (hash_part ~ '^[0-9a-df-np-sv-z]{32}$'),
  created_by uuid references users on delete set null,
  created_at timestamptz not null default now(),
  -- null: pinned until unpinned
  expires_at timestamptz,
  primary key (cache_id, hash_part)
);

-- The live closure as the last pass computed it (hash parts), and the pinned closures per cache.
-- Only the holder of the collector's advisory lock writes them. Unlogged: after a database crash
-- they are empty, and gc_live_state says no live set is known until the next pass computes one.
create unlogged table gc_live_paths (hash_part text primary key);
create unlogged table gc_pinned_paths (cache_id uuid not null, hash_part text not null, primary key (cache_id, hash_part));
create unlogged table gc_live_state (
  id boolean primary key default true check (id),
  -- when the pass that filled the tables began; additions since are topped up (storage/gc/liveSet.ts)
  computed_from timestamptz not null
);

-- When a derivation was first seen outside every retained evaluation's build closure; cleared
-- when one reaches it again. Deleted gc.orphanDerivationHours later.
alter table derivations add column orphaned_since timestamptz;
create index derivations_orphaned on derivations (orphaned_since) where orphaned_since is not null;

-- Collection passes and deep rounds: requested (by a superuser), running, finished or failed.
create table gc_runs (
  id bigint generated always as identity primary key,
  kind text not null check (kind in ('pass', 'deep')),
  state text not null default 'requested' check (state in ('requested', 'running', 'finished', 'failed')),
  requested_by uuid references users on delete set null,
  requested_at timestamptz,
  started_at timestamptz,
  finished_at timestamptz,
  -- counts and bytes (docs/gc.md, "Results")
  result jsonb,
  error text check (length(error) <= 20000)
);
create index gc_runs_kind on gc_runs (kind, id desc);
create index gc_runs_requested on gc_runs (id) where state = 'requested';
