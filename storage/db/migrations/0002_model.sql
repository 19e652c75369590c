-- The relational model of DESIGN.md ("The model"): accounts, organizations, projects, tasks,
-- caches, memberships, invitations, subscriptions, build servers and worker registrations.
-- Names: a row that a declarative state file owns has state_managed = true.

create extension if not exists citext;

create table users (
  id uuid primary key default gen_random_uuid(),
  username citext not null unique check (username ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$'),
  name text not null default '' check (length(name) <= 200),
  email citext unique check (email is null or length(email) <= 254),
  email_verified boolean not null default false,
  -- argon2id PHC string; null for accounts that sign in only through OIDC
  password_hash text,
  oidc_subject text unique,
  superuser boolean not null default false,
  -- SCIM "active": false refuses every sign-in and token of the account
  disabled boolean not null default false,
  settings jsonb not null default '{}',
  state_managed boolean not null default false,
  created_at timestamptz not null default now()
);

-- A session token (JWT) names its row by jti; logout sets revoked_at, which every request checks.
create table sessions (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references users on delete cascade,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  revoked_at timestamptz,
  user_agent text,
  address text
);
create index sessions_user on sessions (user_id);

create table organizations (
  id uuid primary key default gen_random_uuid(),
  name citext not null unique check (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$'),
  display_name text not null default '' check (length(display_name) <= 200),
  description text not null default '' check (length(description) <= 2000),
  -- OpenSSH ed25519 key pair; the private half encrypted at rest (secrets.cryptFile)
  ssh_public_key text not null,
  ssh_private_key bytea not null,
  created_by uuid references users on delete set null,
  state_managed boolean not null default false,
  created_at timestamptz not null default now()
);

create table projects (
  id uuid primary key default gen_random_uuid(),
  organization_id uuid not null references organizations on delete cascade,
  name citext not null check (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$'),
  display_name text not null default '' check (length(display_name) <= 200),
  description text not null default '' check (length(description) <= 2000),
  repository text not null check (length(repository) <= 2000),
  -- attribute wildcard evaluated by default, e.g. packages.x86_64-linux.*
  wildcard text not null default 'packages.*.*' check (length(wildcard) <= 1000),
  default_branch text,
  active boolean not null default true,
  created_by uuid references users on delete set null,
  state_managed boolean not null default false,
  created_at timestamptz not null default now(),
  unique (organization_id, name)
);

create table tasks (
  id uuid primary key default gen_random_uuid(),
  project_id uuid not null references projects on delete cascade,
  name citext not null check (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$'),
  description text not null default '' check (length(description) <= 2000),
  -- null: the project's wildcard
  wildcard text check (length(wildcard) <= 1000),
  branch text,
  keep_evaluations integer not null default 30 check (keep_evaluations >= 0),
  requires_approval boolean not null default false,
  created_at timestamptz not null default now(),
  unique (project_id, name)
);

create table task_stars (
  task_id uuid not null references tasks on delete cascade,
  user_id uuid not null references users on delete cascade,
  created_at timestamptz not null default now(),
  primary key (task_id, user_id)
);

create table caches (
  id uuid primary key default gen_random_uuid(),
  name citext not null unique check (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$'),
  description text not null default '' check (length(description) <= 2000),
  public boolean not null default false,
  priority integer not null default 40 check (priority >= 0),
  -- applied instead of priority for clients in http.localIps when non-zero
  local_priority integer not null default 0 check (local_priority >= 0),
  active boolean not null default true,
  owner_id uuid references users on delete set null,
  -- per-cache storage limit in bytes; null: only cache.maxStorageGb applies
  max_storage_bytes bigint check (max_storage_bytes is null or max_storage_bytes > 0),
  -- Ed25519 signing key: name (e.g. host-main-1), public half, secret half encrypted at rest
  key_name text not null,
  public_key bytea not null check (length(public_key) = 32),
  secret_key bytea not null,
  state_managed boolean not null default false,
  created_at timestamptz not null default now()
);

-- Memberships: role is one of the built-in roles (docs/permissions.md).
create table organization_members (
  organization_id uuid not null references organizations on delete cascade,
  user_id uuid not null references users on delete cascade,
  role text not null check (role in ('Admin', 'Write', 'View')),
  created_at timestamptz not null default now(),
  primary key (organization_id, user_id)
);
create table project_members (
  project_id uuid not null references projects on delete cascade,
  user_id uuid not null references users on delete cascade,
  role text not null check (role in ('Admin', 'Write', 'View')),
  created_at timestamptz not null default now(),
  primary key (project_id, user_id)
);
create table cache_members (
  cache_id uuid not null references caches on delete cascade,
  user_id uuid not null references users on delete cascade,
  role text not null check (role in ('Admin', 'Write', 'View')),
  created_at timestamptz not null default now(),
  primary key (cache_id, user_id)
);

create table api_keys (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references users on delete cascade,
  name text not null check (length(name) between 1 and 100),
  -- SHA-256 (hex) of the whole secret; keys are high-entropy, so no slow hash is needed
  secret_hash text not null unique,
  -- the first characters of the secret, shown in lists so owners can tell keys apart
  secret_prefix text not null,
  permissions text[] not null check (cardinality(permissions) > 0),
  project_id uuid references projects on delete cascade,
  cache_id uuid references caches on delete cascade,
  allowed_ips cidr[] not null default '{}',
  expires_at timestamptz,
  last_used_at timestamptz,
  state_managed boolean not null default false,
  created_at timestamptz not null default now(),
  unique (user_id, name)
);

-- An open invitation grants nothing; accepting creates the membership with the offered role.
create table invitations (
  id uuid primary key default gen_random_uuid(),
  project_id uuid references projects on delete cascade,
  cache_id uuid references caches on delete cascade,
  user_id uuid not null references users on delete cascade,
  role text not null check (role in ('Admin', 'Write', 'View')),
  inviter_id uuid references users on delete set null,
  -- SHA-256 (hex) of the token in the e-mailed link
  token_hash text not null unique,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  check ((project_id is null) <> (cache_id is null))
);
-- One open invitation per user and target (expired ones are discarded before a new insert).
create unique index invitations_one_per_project on invitations (user_id, project_id) where project_id is not null;
create unique index invitations_one_per_cache on invitations (user_id, cache_id) where cache_id is not null;

-- Subscription mode: 0 read-write, 1 read-only, 2 write-only. A project's own subscriptions
-- and its organization's apply together.
create table subscriptions (
  id uuid primary key default gen_random_uuid(),
  project_id uuid references projects on delete cascade,
  organization_id uuid references organizations on delete cascade,
  cache_id uuid not null references caches on delete cascade,
  mode smallint not null check (mode in (0, 1, 2)),
  state_managed boolean not null default false,
  created_at timestamptz not null default now(),
  check ((project_id is null) <> (organization_id is null))
);
create unique index subscriptions_project on subscriptions (project_id, cache_id) where project_id is not null;
create unique index subscriptions_organization on subscriptions (organization_id, cache_id) where organization_id is not null;

create table subscription_requests (
  id uuid primary key default gen_random_uuid(),
  project_id uuid references projects on delete cascade,
  organization_id uuid references organizations on delete cascade,
  cache_id uuid not null references caches on delete cascade,
  mode smallint not null check (mode in (0, 1, 2)),
  requester_id uuid references users on delete set null,
  created_at timestamptz not null default now(),
  check ((project_id is null) <> (organization_id is null))
);
create unique index subscription_requests_project on subscription_requests (project_id, cache_id) where project_id is not null;
create unique index subscription_requests_organization on subscription_requests (organization_id, cache_id) where organization_id is not null;

-- Build servers reached over SSH with the organization's key.
create table servers (
  id uuid primary key default gen_random_uuid(),
  organization_id uuid not null references organizations on delete cascade,
  name citext not null check (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$'),
  host text not null check (length(host) between 1 and 253),
  port integer not null default 22 check (port between 1 and 65535),
  username text not null default 'root' check (length(username) between 1 and 64),
  architectures text[] not null default '{}',
  features text[] not null default '{}',
  max_jobs integer not null default 1 check (max_jobs > 0),
  active boolean not null default true,
  created_at timestamptz not null default now(),
  unique (organization_id, name)
);

-- Worker peer tokens registered per project (48 random bytes, stored as argon2id).
create table worker_registrations (
  id uuid primary key default gen_random_uuid(),
  project_id uuid not null references projects on delete cascade,
  -- the worker UUID the token is for; null: any worker presenting it (a `*:` peers-file line)
  worker_id uuid,
  token_hash text not null,
  name text not null default '' check (length(name) <= 100),
  created_by uuid references users on delete set null,
  created_at timestamptz not null default now()
);
create index worker_registrations_project on worker_registrations (project_id);
