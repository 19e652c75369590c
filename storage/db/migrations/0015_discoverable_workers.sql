-- Discoverable workers (worker.discoverable, docs/worker.md): a registration may name the worker's
-- /proto endpoint, and the server connects to it instead of waiting. The token the server presents
-- there (the worker's worker.acceptedServerTokensFile holds its hash) is sealed with the secret box.
alter table worker_registrations
  add column endpoint text check (endpoint ~ '^wss?://[^/?#@\s]+(/[^?#\s]*)?$' and length(endpoint) <= 2000),
  add column server_token bytea;
