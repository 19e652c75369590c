-- The debug build-ID index (issue 20; docs/binary-cache.md, "Debug info"): GET
-- /cache/{cache}/debuginfo/{build_id} finds the NAR holding lib/debug/.build-id/<xx>/<rest>.debug,
-- the layout Nix's index-debug-info reads build IDs from, among the paths the cache holds.
-- Uploads are indexed when they commit; the debug index sweep backfills paths stored before (and
-- any an interrupted commit missed), marked by debug_indexed.
create table debug_build_ids (
  -- 40 lower-case hex digits: the directory's two, then the file name's 38 before .debug
  build_id text not null check (build_id ~ '^[0-9a-f]{40}$'),
  cached_path_id bigint not null references cached_paths on delete cascade,
  -- the file inside the NAR, e.g. lib/debug/.build-id/ab/cdef….debug
  member text not null check (length(member) <= 400),
  primary key (build_id, cached_path_id)
);
create index debug_build_ids_cached_path on debug_build_ids (cached_path_id);

-- Whether the path's listing has been looked through for build IDs. Adding it with a constant
-- default rewrites no row; the partial index keeps the backfill's search to the rows left.
alter table cached_paths add column debug_indexed boolean not null default false;
create index cached_paths_debug_unindexed on cached_paths (id) where not debug_indexed;
