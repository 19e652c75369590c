-- CI that follows the repository, continued (docs/git-hosts.md).

-- The host's REST API is gitHostApp.apiUrl, never an address a webhook payload names: the
-- addresses once taken from payloads are no longer kept.
alter table git_host_installations drop column api_url;
alter table git_host_reports drop column api_url;

-- Replay dedup: the SHA-256 of each accepted delivery's body. The same signed body again under a
-- new delivery id (a replay by whoever captured it) starts nothing while the first is retained.
alter table git_host_deliveries add column body_sha256 bytea check (length(body_sha256) = 32);
create unique index git_host_deliveries_body on git_host_deliveries (body_sha256);

-- Polling (repositories without an application): a project with poll_interval_secs set is
-- polled with `git ls-remote` every that many seconds (at least projects.minPollIntervalSecs);
-- next_poll_at is when it is due, claimed by one server process at a time. The branch heads last
-- seen are kept per project: a head that moved starts evaluations (trigger poll).
alter table projects
  add column poll_interval_secs integer check (poll_interval_secs between 1 and 86400),
  add column next_poll_at timestamptz;
create index projects_poll_due on projects (next_poll_at) where poll_interval_secs is not null;
create table project_polled_heads (
  project_id uuid not null references projects on delete cascade,
  branch text not null check (length(branch) between 1 and 255),
  commit text not null check (commit ~ '^([0-9a-f]{40}|[0-9a-f]{64})$'),
  seen_at timestamptz not null default now(),
  primary key (project_id, branch)
);

-- Approval: an evaluation of a pull request from a fork, for a task with requires_approval, is
-- parked in phase waiting with awaiting_approval set, until a member with triggerEvaluation
-- approves it (POST /evals/{id} {method: "approve"}). The scheduler never re-queues such a one
-- for want of a cache.
alter table evaluations add column awaiting_approval boolean not null default false;
