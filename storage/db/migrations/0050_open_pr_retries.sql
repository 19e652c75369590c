-- open_pr runs are retried (issue 19, docs/git-hosts.md "open_pr", "Retries"): a run that fails
-- (the host answered 500 or 429, the worker was lost, no worker was connected) waits in 'retrying'
-- until next_attempt_at, doubling, up to a bounded number of attempts; then 'failed'. A run is
-- written 'retrying' (due now) by whichever process hears the evaluation complete, and taken by a
-- process with a suitable worker: so a run no suitable process heard is started later.
-- 'running' holds a lease: a run whose process died is taken again once lease_until passed.
-- `pushed` is written as soon as the worker pushed: a retry after that only opens the pull request.
alter table open_pr_runs drop constraint open_pr_runs_status_check;
alter table open_pr_runs add constraint open_pr_runs_status_check
  check (status in ('running', 'retrying', 'opened', 'updated', 'unchanged', 'failed'));
alter table open_pr_runs
  add column attempts integer not null default 0 check (attempts >= 0),
  add column next_attempt_at timestamptz,
  add column lease_until timestamptz,
  add column updated_at timestamptz not null default now();
alter table open_pr_runs alter column status set default 'retrying';
-- the runs still owed a try, by when
create index open_pr_runs_owed on open_pr_runs (next_attempt_at) where status in ('retrying', 'running');
-- runs a server left 'running' before this migration (its process is gone with the upgrade): taken again
update open_pr_runs set next_attempt_at = now() where status = 'running';
