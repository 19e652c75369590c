-- The restore pass's candidates (docs/builds.md, "Whose completion", "Whose failure"), found
-- without the ready query: builds queued again for other tenants only, and failures on a worker
-- only some organizations trust that landed after another organization's completion. In a file of
-- its own: building an index locks the table against writes only (0073's alter table takes every lock).
create index derivation_builds_scoped_queued on derivation_builds (id)
  where status = 'queued' and (done_for is not null or failed_for is not null);
create index derivation_builds_failed_over_completion on derivation_builds (id)
  where status = 'failed' and done_for is not null;
