-- The dispatches of a build that a worker declined (docs/builds.md, "Declined builds"): they are
-- counted in attempts (every dispatch is) but spend none of build.maxAttempts. Kept with the row so
-- that a restart, another server process or a flood of other builds' declines cannot forget them.
alter table derivation_builds add column declines integer not null default 0;

-- The ready read orders by (queued_at, id) and pages past a window no worker takes by that key
-- (services/builds/readyQueue.ts): the partial index carries id too, so the read still streams in
-- index order into its limit (one graph batch's builds share queued_at: sorting them by id first
-- would gather each one's projects before the limit). The index is partial (ready builds only),
-- so building it reads the table but writes little; the table stays locked for that read while the
-- migration runs, before this process serves (a server process of the old version waits meanwhile).
drop index derivation_builds_ready;
create index derivation_builds_ready on derivation_builds (queued_at, id) where status = 'queued' and inputs_remaining = 0;
