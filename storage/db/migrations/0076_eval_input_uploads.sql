-- What one dispatch of an evaluation may upload to the shared evaluation cache (docs/eval-cache.md,
-- "Server side"): only the NAR hashes its query named and the organization lacked, each once, and
-- at most the upload budget in bytes. Kept in the row, not in a process's memory: the query and the
-- upload may reach different server processes. Reset with the token at each dispatch, cleared when
-- the evaluation stops running. Both columns have constant defaults: adding them rewrites nothing.
alter table evaluations
  add column input_cache_wanted text[] not null default '{}',
  add column input_cache_bytes bigint not null default 0 check (input_cache_bytes >= 0);
