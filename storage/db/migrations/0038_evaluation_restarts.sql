-- Restarting a finished evaluation (docs/builds.md, "Restarting"): a new evaluation of the same
-- task, commit and attribute that names the one it restarts, and whose graph recording puts the
-- failed builds it reaches back in the queue (failed otherwise stays failed).
alter table evaluations add column restart_of uuid references evaluations (id) on delete set null;
alter table evaluations add column retry_failed boolean not null default false;
