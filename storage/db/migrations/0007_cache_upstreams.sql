-- Upstream binary caches (issue 5, item 6) and the indexes of the NAR management API.
--
-- A cache may name other binary caches to fall back to: a narinfo the cache does not hold is asked
-- of its upstreams in priority order, and served only when it carries a valid signature by the
-- upstream's key (services/upstreams.ts, docs/caches.md).
create table cache_upstreams (
  id uuid primary key default gen_random_uuid(),
  cache_id uuid not null references caches on delete cascade,
  -- the upstream cache's root, without a trailing slash: http(s)://host/path
  url text not null check (url ~ '^https?://[^/?#@]+(/[^?#]*)?$' and url !~ '/$' and length(url) <= 2000),
  -- <key name>:<base64 of the 32-byte Ed25519 public key>, as Nix's trusted-public-keys lists it
  public_key text not null check (length(public_key) <= 300),
  -- lower is asked first
  priority integer not null default 50 check (priority >= 0),
  created_at timestamptz not null default now(),
  unique (cache_id, url)
);

-- GET /caches/{cache}/nars sorts one cache's signature rows by upload or fetch time.
create index path_signatures_cache_created on path_signatures (cache_id, created_at);
create index path_signatures_cache_fetched on path_signatures (cache_id, last_fetched_at);
