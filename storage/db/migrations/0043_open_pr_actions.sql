-- The open_pr task action (issue 19 item 6, docs/git-hosts.md "open_pr"): after a successful
-- evaluation of its task, a worker runs `command` (an argv, no shell) in a clone at the evaluated
-- commit and force-pushes what changed to `branch`; the server then opens or updates the pull
-- request from it. commit_name / commit_email override pullRequests.commitName / commitEmail for
-- this action (null: the instance's setting). open_pr actions receive no events (events stays '{}').
alter table task_actions drop constraint task_actions_kind_check;
alter table task_actions add constraint task_actions_kind_check check (kind in ('send_web_request', 'send_mail', 'open_pr'));

alter table task_actions
  add column command text[] check (cardinality(command) between 1 and 64),
  add column branch text check (length(branch) between 1 and 200),
  add column commit_name text check (length(commit_name) between 1 and 200),
  add column commit_email text check (length(commit_email) between 3 and 254),
  add constraint task_actions_open_pr_check check ((kind = 'open_pr') = (command is not null and branch is not null)),
  add constraint task_actions_open_pr_author_check check (kind = 'open_pr' or (commit_name is null and commit_email is null));

-- One run of an open_pr action per successful evaluation (services/gitHosts/openPrRuns.ts): the row
-- is the claim (two server processes never run the same one) and the action's last run as shown.
create table open_pr_runs (
  id uuid primary key default gen_random_uuid(),
  evaluation_id uuid not null references evaluations on delete cascade,
  task_action_id uuid not null references task_actions on delete cascade,
  status text not null default 'running' check (status in ('running', 'opened', 'updated', 'unchanged', 'failed')),
  pushed text check (pushed ~ '^([0-9a-f]{40}|[0-9a-f]{64})$'),
  pull_request integer check (pull_request > 0),
  url text check (length(url) <= 2000),
  error text check (length(error) <= 2000),
  created_at timestamptz not null default now(),
  finished_at timestamptz,
  unique (evaluation_id, task_action_id)
);
create index open_pr_runs_action on open_pr_runs (task_action_id, created_at desc);
