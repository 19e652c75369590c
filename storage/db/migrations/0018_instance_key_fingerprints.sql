-- The keys kiln generates for itself (crypt.key, the secret box key; jwt.secret, the session-signing
-- key) now live in files under baseDir, never in the database: a copy of the database alone must
-- not open sealed secrets or forge sessions. The database keeps only a fingerprint of each key
-- (HMAC-SHA256 of a fixed label under the key), so a process started with another key, or with
-- none, notices and refuses to start instead of generating a second key that cannot open the
-- first one's data. Rows left in instance_secrets by older versions move to the key file on the
-- next start (storage/instanceKeys.ts).
create table instance_key_fingerprints (
  name text primary key check (name in ('crypt.key', 'jwt.secret')),
  fingerprint bytea not null check (length(fingerprint) = 32),
  created_at timestamptz not null default now()
);
