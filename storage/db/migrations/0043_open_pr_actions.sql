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
