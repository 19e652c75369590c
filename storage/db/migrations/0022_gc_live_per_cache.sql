-- Garbage collection: the live set per cache (issue 20, docs/gc.md "The live set"). An evaluation
-- keeps paths alive only in the caches its project may write to (a read-write or write-only
-- subscription of the project or its organization, which the cache's admin granted), so one
-- tenant's retention neither keeps another tenant's unrelated copies nor touches their collection.
-- Unlogged and rebuilt by every pass: the old rows are dropped, and with the state row gone no
-- live set is known (uploads evict nothing) until the next pass computes one.
delete from gc_live_state;
drop table gc_live_paths;
create unlogged table gc_live_paths (cache_id uuid not null, hash_part text not null, primary key (cache_id, hash_part));

-- Evaluations a top-up of the live set may skip: final when an earlier statement added their
-- closures whole (storage/gc/liveSet.ts).
alter table gc_live_state add column covered uuid[] not null default '{}';
