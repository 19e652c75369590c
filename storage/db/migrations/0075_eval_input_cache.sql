-- The shared evaluation cache (docs/eval-cache.md): locked flake inputs' source trees as NARs,
-- stored once per organization under the blob key eval-inputs/<organization>/…. The
-- organization scopes every read: an input may be private, and knowing its hash grants nothing.
create table eval_input_blobs (
  organization_id uuid not null references organizations on delete cascade,
  -- the NAR's SHA-256 (hex), the narHash flake.lock pins
  nar_hash text not null check (nar_hash ~ '^[0-9a-f]{64}$'),
  -- eval-inputs/<organization>/<nar hash>-<uuid>: each upload its own key, so a sweep that drops
  -- a row never deletes the bytes of a concurrent upload of the same hash
  blob_key text not null,
  size bigint not null check (size >= 0),
  created_at timestamptz not null default now(),
  last_used_at timestamptz not null default now(),
  primary key (organization_id, nar_hash)
);
-- the sweep's two orders: unused for longest first, both for the age rule and the size rule
create index eval_input_blobs_last_used on eval_input_blobs (last_used_at);

-- The capability of one dispatch of an evaluation: its worker reads and writes the organization's
-- blobs with it while the evaluation is fetching or evaluating (SHA-256 hex of the token).
alter table evaluations add column input_cache_token_hash text check (input_cache_token_hash ~ '^[0-9a-f]{64}$');
