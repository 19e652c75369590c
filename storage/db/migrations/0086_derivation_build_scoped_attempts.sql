-- The attempts of a shared build spent on a worker only some organizations trust (issue 23, review
-- r5a-2, docs/builds.md "Whose attempts"): they count against those organizations only. One row an
-- attempt spent there (a transient failure, a loss after the build began, a final failure, a
-- completion another organization does not take): the attempt's number and the organizations of
-- its worker (derivation_builds.worker_scope at its dispatch). Every other spent attempt (kiln's own
-- workers') counts for every organization. Rows go when the build gets fresh attempts (a restart, a
-- retry, another organization's claim of a failure) and with their build.
create table derivation_build_scoped_attempts (
  derivation_build_id uuid not null references derivation_builds (id) on delete cascade,
  attempt integer not null,
  scope uuid[] not null,
  primary key (derivation_build_id, attempt)
);
