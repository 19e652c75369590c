-- Identity (issue 4, accounts side): e-mail verification links, OIDC sign-ins in flight, and the
-- SCIM client's own identifier for a user.

-- One row per verification link sent; the link carries the token, the row only its SHA-256 (hex).
-- Verifying deletes every row of the user, so an old link cannot verify a newer address.
create table email_verifications (
  token_hash text primary key,
  user_id uuid not null references users on delete cascade,
  -- the address the link was sent to: changing the e-mail invalidates the link
  email citext not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null
);
create index email_verifications_user on email_verifications (user_id);

-- An authorization request sent to the OpenID provider and not yet answered. Kept in the database,
-- not in process memory, so that the callback may reach any server process; single use.
create table oidc_logins (
  state text primary key,
  code_verifier text not null,
  nonce text not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null
);

-- SCIM "externalId": the identity provider's own id for the user, stored and echoed back.
alter table users add column scim_external_id text check (length(scim_external_id) <= 200);
alter table users add column updated_at timestamptz not null default now();
