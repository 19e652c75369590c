-- A build that was running when its evaluation was aborted (docs/builds.md, "Aborting"): its job is
-- cancelled on the worker and the shared build ends `aborted`. It is not a failure of the
-- derivation: a later evaluation that reaches it queues it again (services/graphRecorder.ts).
alter table derivation_builds drop constraint derivation_builds_status_check;
alter table derivation_builds add constraint derivation_builds_status_check
  check (status in ('queued', 'started', 'completed', 'failed', 'substituted', 'aborted'));
