-- Whose completion (issue 24, docs/builds.md "Build servers: whose completion"): a derivation_build
-- completed on an organization's build server stands for that organization only. done_for holds
-- the organizations a completed build stands for; null: every tenant (built by kiln's own workers,
-- or substituted). It survives a re-queue for another tenant (requeue other_tenant), so a second
-- completion on another organization's server adds that organization instead of replacing it.
alter table derivation_builds add column done_for uuid[];

-- What a completion's done_for becomes: the prior organizations plus the completing worker's when
-- that worker is a build server's (worker id = server id); null (every tenant) otherwise.
create function kiln_completion_scope(prior uuid[], worker uuid) returns uuid[] language sql stable as $$
  select case when s.organization_id is null then null
              else array(select distinct x from unnest(coalesce(prior, '{}'::uuid[]) || s.organization_id) as u(x) order by x) end
  from (select (select organization_id from servers where id = worker) as organization_id) s
$$;
