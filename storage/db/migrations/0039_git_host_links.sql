-- CI that follows the repository, continued (docs/git-hosts.md).

-- Private repositories: a project is linked to the installation of the Git host application that
-- covers its repository, and its evaluations then fetch with an installation token. The link is
-- made only when the repository itself names the project (the file .kiln-projects on its default
-- branch, read through the application): naming a private repository's URL is not enough, or any
-- tenant could read a repository the application is installed on. repository_key: the project's
-- repository URL as matched when the link was made; a project whose URL changed is not linked.
-- verified_at: when the file last named the project; the link is checked again after a while, so
-- removing the line revokes it. The link goes with the repository or the installation.
create table project_git_host_links (
  project_id uuid primary key references projects on delete cascade,
  installation_id bigint not null,
  repository_id bigint not null,
  repository_key text not null check (length(repository_key) <= 2000),
  verified_at timestamptz not null,
  foreign key (installation_id, repository_id) references git_host_repositories on delete cascade
);
create index project_git_host_links_repository on project_git_host_links (installation_id, repository_id);

-- Per project: cancel_superseded (default on) aborts the still open evaluations of a branch or
-- pull request when a push, poll or pull request event brings a newer commit of it for the same
-- task; requires_approval parks pull requests from forks for every task, as a task's own
-- requires_approval does for that task (docs/git-hosts.md).
alter table projects
  add column cancel_superseded boolean not null default true,
  add column requires_approval boolean not null default false;
