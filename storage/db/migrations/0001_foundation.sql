-- kiln's foundation. The runner creates schema_migrations itself (it reads it before any file runs).
-- Rules for every migration: forward-only, never edited once released, no begin/commit of its own
-- (the runner wraps each file in one transaction), nothing that cannot run in a transaction.

-- Secrets kiln generates for itself on first start (the session-token signing key, the key that
-- encrypts secrets at rest, ...) when no secrets.*File names one. Kept in the database so that
-- every server process of one installation shares them.
create table instance_secrets (
  name text primary key check (name ~ '^[a-z][a-z0-9_.]*$'),
  value bytea not null,
  created_at timestamptz not null default now()
);
