-- Server processes sharing the database (docs/builds.md, "Several server processes"). Every process
-- dispatches to the workers connected to it; a job is orphaned when its worker has no open
-- connection on a live process. A process is live while it holds its instance lease, the advisory
-- lock (0x6b696c6e, lock_key) on a connection of its own: PostgreSQL drops the lock the moment the
-- process dies, SIGKILL included, so no heartbeat timeout is involved.
create table server_instances (
  id uuid primary key default gen_random_uuid(),
  lock_key integer not null unique check (lock_key >= 0),
  hostname text not null default '' check (length(hostname) <= 255),
  pid integer not null default 0,
  started_at timestamptz not null default now()
);

alter table worker_connections add column server_instance_id uuid;
