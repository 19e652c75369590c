-- CI that follows the repository (docs/git-hosts.md): what started an evaluation, the Git host
-- application's webhook deliveries and installations, and the status reports owed to commits.

-- What started an evaluation: a person or key (manual), a push to a branch, a pull request, or a
-- poll that saw a branch head move. branch: the branch of a push or poll; pull_request: the
-- pull request's number. Manual evaluations keep both null.
alter table evaluations
  add column trigger text not null default 'manual' check (trigger in ('manual', 'push', 'pull_request', 'poll')),
  add column branch text check (length(branch) between 1 and 255),
  add column pull_request integer check (pull_request > 0),
  add constraint evaluations_trigger_fields check (
    (trigger = 'manual' and branch is null and pull_request is null)
    or (trigger in ('push', 'poll') and branch is not null and pull_request is null)
    or (trigger = 'pull_request' and pull_request is not null));
create index evaluations_task_branch on evaluations (task_id, branch, created_at desc) where branch is not null;
create index evaluations_task_pull_request on evaluations (task_id, pull_request, created_at desc) where pull_request is not null;

-- Webhook deliveries seen, by the host's delivery id (X-GitHub-Delivery): a delivery the host
-- sends again is answered without a second evaluation. Written in the transaction of what it started.
create table git_host_deliveries (
  id text primary key check (length(id) between 1 and 200),
  event text not null check (length(event) <= 100),
  received_at timestamptz not null default now()
);
create index git_host_deliveries_received on git_host_deliveries (received_at);

-- Installations of the application and the repositories each may access (installation and
-- installation_repositories events). api_url: the host's REST API, as its signed payloads name it.
create table git_host_installations (
  id bigint primary key,
  account text not null check (length(account) <= 200),
  api_url text not null check (length(api_url) <= 2000),
  suspended boolean not null default false,
  updated_at timestamptz not null default now()
);
create table git_host_repositories (
  installation_id bigint not null references git_host_installations on delete cascade,
  repository_id bigint not null,
  -- owner/name, lower case
  full_name text not null check (length(full_name) <= 300),
  primary key (installation_id, repository_id)
);
create index git_host_repositories_name on git_host_repositories (full_name);

-- One status report per evaluation started from the host (a check run, or a commit status where
-- the host has no check runs). Durable: the row is written with the evaluation, and the reporter
-- sends what the evaluation's phase asks until reported_phase is the phase of a finished evaluation.
create table git_host_reports (
  evaluation_id uuid primary key references evaluations on delete cascade,
  installation_id bigint not null,
  api_url text not null check (length(api_url) <= 2000),
  -- owner/name as the host spells it
  repository text not null check (length(repository) <= 300),
  head_sha text not null check (head_sha ~ '^([0-9a-f]{40}|[0-9a-f]{64})$'),
  -- the check run's name (and a commit status's context)
  name text not null check (length(name) <= 300),
  kind text not null default 'check_run' check (kind in ('check_run', 'status')),
  check_run_id bigint,
  -- the phase and progress last reported; null before the first report
  reported_phase text,
  reported_progress text,
  attempts integer not null default 0,
  next_attempt_at timestamptz not null default now(),
  last_error text check (length(last_error) <= 2000),
  created_at timestamptz not null default now()
);
create index git_host_reports_open on git_host_reports (next_attempt_at)
  where reported_phase is null or reported_phase not in ('completed', 'failed', 'aborted');
