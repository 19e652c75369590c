-- The binary cache's storage (issue 5): what kiln holds of each store path, which caches hold it
-- (one signature row each), and uploads in progress. docs/binary-cache.md explains the model.
--
-- Invariant: a cached_paths row exists only while its blob `nar/<file_hash>.nar.zst` does. The blob
-- is written first, then the rows in one transaction; deletion removes rows first, the blob after.
-- Writers and deleters of one blob serialise on pg_advisory_xact_lock(hashtextextended('nar:' ||
-- file_hash, 0)), so a blob is never deleted between another upload's put and its commit.

-- A store path's content as kiln stores it, shared by every cache that holds the same NAR. Keyed by
-- the store path and its NarHash: an unreproducible build of the same path uploaded to another cache
-- is another row, so no cache ever serves bytes that were uploaded to a different one.
create table cached_paths (
  id bigint generated always as identity primary key,
  hash_part text not null check (hash_part ~ '^[0-9a-df-np-sv-z]{32}$'),
  store_path text not null check (length(store_path) <= 300),
  -- sha256:<nix32> of the uncompressed NAR
  nar_hash text not null,
  nar_size bigint not null check (nar_size > 0),
  -- base names (<hash>-<name>), sorted
  refs text[] not null default '{}',
  -- base name of the .drv, or null
  deriver text,
  -- content address (fixed:r:sha256:…), or null
  ca text,
  -- nix32 SHA-256 of the stored zstd file; the blob is nar/<file_hash>.nar.zst
  file_hash text not null check (file_hash ~ '^[0-9a-df-np-sv-z]{52}$'),
  file_size bigint not null check (file_size > 0),
  -- the .ls listing, byte for byte what Nix writes with write-nar-listing
  listing text not null,
  created_at timestamptz not null default now(),
  unique (hash_part, nar_hash)
);
create index cached_paths_file_hash on cached_paths (file_hash);

-- A cache holds a path through its signature row: the narinfo signature made with the cache's key
-- at ingest. Deleting a path from one cache removes only this row (storage/nars/pathDeletion.ts).
create table path_signatures (
  cache_id uuid not null references caches on delete cascade,
  hash_part text not null,
  cached_path_id bigint not null references cached_paths,
  -- <key name>:<base64>, the narinfo's Sig line
  signature text not null,
  created_at timestamptz not null default now(),
  -- written in batches a few seconds after narinfo requests, never per request
  last_fetched_at timestamptz,
  primary key (cache_id, hash_part)
);
create index path_signatures_cached_path on path_signatures (cached_path_id);

-- An upload that has not been ingested yet. Its bytes are a file under <baseDir>/staging on the
-- disk of the server process that took them. REST chunked uploads are keyed by the store path's
-- hash part; `nix copy` uploads by "nar/<file name>" as Nix named the file.
create table staged_uploads (
  cache_id uuid not null references caches on delete cascade,
  upload_key text not null check (upload_key ~ '^([0-9a-df-np-sv-z]{32}|nar/[0-9a-z]{1,64}\.nar(\.[a-z0-9]{1,5})?)$'),
  -- how the staged bytes are compressed: none for REST, the file's extension for nix copy
  compression text not null,
  -- the length of the staged file that counts; bytes past it (a chunk cut short by a crash) are cut off
  bytes_staged bigint not null default 0 check (bytes_staged >= 0),
  -- the narinfo of the last finalize attempt (JSON), kept for operators when it failed
  narinfo jsonb,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (cache_id, upload_key)
);
create index staged_uploads_updated on staged_uploads (updated_at);
