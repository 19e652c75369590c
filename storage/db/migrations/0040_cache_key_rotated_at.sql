-- When a cache's signing key was last rotated (issue 20; docs/caches.md, "Key rotation"):
-- POST /caches/{cache}/key/rotate refuses a rotation sooner than cache.keyRotationMinIntervalSecs
-- after it. cache_previous_keys cannot say: its row goes when the overlap ends. Null: never rotated
-- (or rotated before this column; the previous key's rotated_at fills it where one is listed).
alter table caches add column key_rotated_at timestamptz;
update caches c set key_rotated_at = k.rotated_at from cache_previous_keys k where k.cache_id = c.id;
