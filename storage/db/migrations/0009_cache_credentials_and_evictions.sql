-- Two cache rules of issue 5 (docs/caches.md).
--
-- Upstream caches that need credentials: HTTP Basic (user and password) or a bearer token, sealed
-- with the secret box (services/upstreamCredentials.ts) like webhook secrets; null for a public
-- upstream. Never returned by the API.
alter table cache_upstreams add column credentials bytea;

-- Deleting a path from the last cache that holds it marks the derivation builds that produced it
-- as no longer cached, in the same transaction (services/cacheNars.ts). The next evaluation that
-- reaches such a finished build queues it again (services/graphRecorder.ts), so the output is
-- substituted or built anew instead of being taken for granted.
alter table derivation_builds add column outputs_cached boolean not null default true;
