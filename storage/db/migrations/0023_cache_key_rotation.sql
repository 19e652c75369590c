-- Signing key rotation (issue 20; docs/binary-cache.md, "Key rotation"). POST /caches/{cache}/key/rotate
-- gives a cache a new key <host>-<cache>-N+1; the key it signed with until then stays listed, and its
-- signatures stay in narinfos, until listed_until, so clients trusting either key keep working. The
-- sign sweep (services/caches/signSweep.ts) re-signs every path with the new key and, during the
-- overlap, signs paths uploaded after the rotation with the previous key too.

-- The key a cache signed with before its last rotation. At most one per cache: rotating again during
-- the overlap ends the older key's overlap at once. The row goes when its overlap has ended.
create table cache_previous_keys (
  cache_id uuid primary key references caches on delete cascade,
  key_name text not null,
  public_key bytea not null,
  -- sealed with the secret box, like caches.secret_key
  secret_key bytea not null,
  rotated_at timestamptz not null,
  listed_until timestamptz not null
);

-- This copy's signature by the cache's previous key (<key name>:<base64>), served as a second Sig
-- line beside `signature` while that key is listed; null outside an overlap.
alter table path_signatures add column previous_signature text;
