-- Users' SSH public keys (issue 24): kiln's SSH server (services/ssh) logs a user in by one of
-- them. The key is stored as OpenSSH writes it (`<type> <base64 blob>`), without the comment;
-- the blob is unique across users, so a login names one user.
create table user_ssh_keys (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references users on delete cascade,
  name text not null check (length(name) between 1 and 100),
  key_type text not null,
  -- base64 of the SSH wire-format public key blob
  key_blob text not null unique,
  -- `SHA256:<base64>` as `ssh-keygen -lf` prints it
  fingerprint text not null,
  last_used_at timestamptz,
  created_at timestamptz not null default now(),
  unique (user_id, name)
);
create index user_ssh_keys_user on user_ssh_keys (user_id);
