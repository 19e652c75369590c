-- The two free re-queue loops of the spec's build rules (docs/builds.md, "Scheduler rules"):
-- a build whose inputs were not available is retried without counting an attempt at most
-- build.inputsUnavailableMaxLoops times; a derivation whose outputs a cache claimed but a worker
-- could not fetch is re-queued for substitution at most build.substituteMissEscalationThreshold
-- times, then built like any other.
alter table derivation_builds
  add column input_loops integer not null default 0 check (input_loops >= 0),
  add column substitute_misses integer not null default 0 check (substitute_misses >= 0);
