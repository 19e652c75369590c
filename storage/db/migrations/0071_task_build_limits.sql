-- Per-task build time limits (issue 23 item 7, docs/builds.md "Time limits"): the task's
-- timeout and max-silent for its builds whose derivation sets none, in place of
-- build.defaultTimeoutSecs / build.defaultMaxSilentSecs. Null: the server's default; 0: none.
alter table tasks
  add column build_timeout_secs integer check (build_timeout_secs between 0 and 2592000),
  add column build_max_silent_secs integer check (build_max_silent_secs between 0 and 2592000);
