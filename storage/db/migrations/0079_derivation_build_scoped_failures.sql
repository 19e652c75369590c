-- Each organization's own failure of a shared build (issue 24, docs/builds.md "Whose failure"): a
-- final failure on a worker only some organizations trust stands for them (failed_for), but the
-- record holds one failure, which another organization's completion clears and another's failure
-- overwrites. A row here keeps, per organization of the failure, what it said, so that organization
-- still reads the build as failed, with its own reason, once another scope's completion landed
-- (services/builds/organizationStatus.ts). Written with the scoped failure only (kiln's own
-- workers' failures stand for everyone and are the record's); read only where failed_for names the
-- organization, so a row left from an earlier failure is never read on its own.
create table derivation_build_scoped_failures (
  derivation_build_id uuid not null references derivation_builds (id) on delete cascade,
  organization_id uuid not null references organizations (id) on delete cascade,
  failure_class text not null check (failure_class in ('FailedPermanent', 'FailedTransient', 'FailedTimeout')),
  failure_reason text,
  failure_message text check (length(failure_message) <= 20000),
  -- the attempt that failed (derivation_builds.attempts then): its log, not a later attempt's for
  -- another organization, is this organization's (services/gitHosts/evaluationSnapshot.ts)
  failure_attempt integer,
  primary key (derivation_build_id, organization_id)
);
-- an organization's deletion finds its rows without reading the table
create index derivation_build_scoped_failures_organization on derivation_build_scoped_failures (organization_id);

-- The scoped failures standing now (failed, or queued again for another organization with the
-- failure kept) keep theirs, where failed_for names one organization only: the record holds the
-- last failure, which of several organizations' is unknown, and one must never read another's. A
-- completion that already cleared one, and an organization of several, have nothing to keep: that
-- organization reads the build as failed with no failure detail (and no log head).
insert into derivation_build_scoped_failures (derivation_build_id, organization_id, failure_class, failure_reason, failure_message, failure_attempt)
select db.id, o.id, db.failure_class, db.failure_reason, db.failure_message, db.attempts
from derivation_builds db cross join unnest(db.failed_for) as f(org) join organizations o on o.id = f.org
where cardinality(db.failed_for) = 1 and db.failure_class is not null
on conflict do nothing;
