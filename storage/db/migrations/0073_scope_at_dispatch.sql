-- Build-server tenant holes (issue 24, docs/builds.md "Whose completion" and "Whose failure").
--
-- worker_scope: the organizations the worker that took the build's current (or last) attempt
-- builds for alone, written at dispatch: a build server's worker serves its organization's
-- projects, a worker registered per project (POST /projects/{project}/workers) the projects whose
-- tokens it proved; null for kiln's own (open-mode) workers. A completion reads it instead of
-- looking the worker up in `servers` when it commits, so a server deleted while its build runs
-- still scopes the completion.
alter table derivation_builds add column worker_scope uuid[];
-- Builds running on a build server as this migration applies were dispatched before the column:
-- scoped as the completion used to scope them, by the server.
update derivation_builds db set worker_scope = array[s.organization_id] from servers s where db.status = 'started' and db.worker_id = s.id;
-- failed_for: the organizations a final failure on such a worker stands for. Another organization
-- whose building evaluation wants the build queues it again for itself, as it does a completion.
alter table derivation_builds add column failed_for uuid[];

-- A completion's done_for: the prior organizations plus the worker's scope; null (every tenant)
-- when kiln's own worker built it. A new overload: server processes still on the code before this
-- migration call the old one (uuid) until they restart, so it stays (a later migration drops it).
create function kiln_completion_scope(prior uuid[], scope uuid[]) returns uuid[] language sql immutable as $$
  select case when scope is null then null
              else array(select distinct x from unnest(coalesce(prior, '{}'::uuid[]) || scope) as u(x) order by x) end
$$;

-- The organizations of these projects (a dispatch's worker_scope); null for null (an open worker).
create function kiln_projects_scope(project_ids uuid[]) returns uuid[] language sql stable as $$
  select case when project_ids is null then null
              else array(select distinct organization_id from projects where id = any(project_ids) order by organization_id) end
$$;

-- The restore pass's indexes are 0074's: built in a transaction of their own, they lock the table
-- against writes only, not against reads as this file's alter table does.
