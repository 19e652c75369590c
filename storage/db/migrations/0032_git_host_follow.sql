-- CI that follows the repository, continued (docs/git-hosts.md).

-- The host's REST API is gitHostApp.apiUrl, never an address a webhook payload names: the
-- addresses once taken from payloads are no longer kept.
alter table git_host_installations drop column api_url;
alter table git_host_reports drop column api_url;

-- Replay dedup: the SHA-256 of each accepted delivery's body. The same signed body again under a
-- new delivery id (a replay by whoever captured it) starts nothing while the first is retained.
alter table git_host_deliveries add column body_sha256 bytea check (length(body_sha256) = 32);
create unique index git_host_deliveries_body on git_host_deliveries (body_sha256);
