-- Issue 23 (dispatch): the readiness moves become HOT updates.
--
-- A completion batch moves inputs_remaining of each dependent (2.1 moves per dispatched build on
-- the dispatch bench). PostgreSQL updates a row in place (HOT: no new index entries) only when no
-- column any index names, keys or predicate, changes; derivation_builds_ready's predicate named
-- inputs_remaining, so every move wrote a new entry in each of the table's indexes. The ready index
-- now names `ready` (inputs_remaining = 0, held by the check below), which changes once, on the
-- move that takes the counter to 0: the moves before it change only inputs_remaining.
--
-- `ready` defaults to true (no rewrite: a constant default), and the rows with open inputs are set
-- false: the queued builds waiting for inputs, and on a long-lived install every build whose input
-- failed or was queued again (review r6c-2), so the old index goes first and is not kept up by the
-- update. The check is added NOT VALID, as in 0080 (validating scans the whole table here); it holds
-- for every row written from now on, and the update below makes it hold for the rows before.
drop index derivation_builds_ready;
alter table derivation_builds add column ready boolean not null default true;
update derivation_builds set ready = false where inputs_remaining <> 0;
alter table derivation_builds add constraint derivation_builds_ready_check check (ready = (inputs_remaining = 0)) not valid;

-- The index as in 0078, by the column that changes once. Building it reads the table under a lock
-- against writes while the migration runs, before this process serves (0078 says the same).
create index derivation_builds_ready on derivation_builds (queued_at, id) where status = 'queued' and ready;
-- the new column's statistics at once: the planner would otherwise assume half the rows ready
analyze derivation_builds (ready);

-- Room in each page for a row's next version: an update is HOT only when its new version fits in
-- the same page, and the recording fills pages to the brim (fillfactor 100). Applies to pages
-- written from now on; taking the setting rewrites nothing.
alter table derivation_builds set (fillfactor = 80);
