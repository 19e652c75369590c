-- The dispatches of a build that a worker declined (docs/builds.md, "Declined builds"): they are
-- counted in attempts (every dispatch is) but spend none of build.maxAttempts. Kept with the row so
-- that a restart, another server process or a flood of other builds' declines cannot forget them.
alter table derivation_builds add column declines integer not null default 0;
