-- Build servers as builders (issue 24 item 5, docs/builds.md "Build servers"): the host key kiln
-- pins for each server. The first successful check-connection pins the key the server showed;
-- kiln's SSH connections to it then accept that key only, until an admin checks again (which
-- pins the key shown then). Null: never checked, so no builds go there.
alter table servers
  add column host_key text check (host_key ~ '^[a-z0-9@.-]+ [A-Za-z0-9+/]+={0,2}$'),
  add column host_key_pinned_at timestamptz;
