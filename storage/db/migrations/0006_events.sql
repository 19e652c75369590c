-- Events (issue 6): the outbox of durable events, webhooks, task actions, their deliveries and
-- the attempts of each delivery, plus the relay table the LISTEN/NOTIFY bus uses for payloads
-- too large for NOTIFY. docs/events.md describes the whole flow.

-- One row per durable event, written in the transaction of the change it reports. `body` is the
-- envelope exactly as it is sent and signed, so every retry sends the same bytes. The scope
-- columns say what the event concerns; they are not foreign keys, because an event outlives
-- what it reports (project.delete names a project that is gone).
create table event_outbox (
  id uuid primary key,
  event text not null check (length(event) <= 200),
  body text not null,
  organization_id uuid,
  project_id uuid,
  task_id uuid,
  evaluation_id uuid,
  build_id uuid,
  cache_id uuid,
  user_id uuid,
  created_at timestamptz not null default now()
);
create index event_outbox_created on event_outbox (created_at);

-- Webhooks of a project, of a cache, or of the instance (both null: every durable event).
create table webhooks (
  id uuid primary key default gen_random_uuid(),
  project_id uuid references projects on delete cascade,
  cache_id uuid references caches on delete cascade,
  url text not null check (length(url) <= 2000),
  -- globs (build.*, task.star); empty: everything in scope
  events text[] not null default '{}',
  -- the signing secret, sealed with the installation's secret box (storage/secretBox.ts):
  -- kiln needs the plain text to sign, so it cannot be a one-way hash
  secret bytea not null,
  active boolean not null default true,
  description text not null default '' check (length(description) <= 500),
  created_by uuid references users on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  check (project_id is null or cache_id is null)
);
create index webhooks_project on webhooks (project_id) where project_id is not null;
create index webhooks_cache on webhooks (cache_id) where cache_id is not null;

-- Per-task actions that receive the same envelopes as webhooks.
create table task_actions (
  id uuid primary key default gen_random_uuid(),
  task_id uuid not null references tasks on delete cascade,
  name text not null check (length(name) between 1 and 100),
  kind text not null check (kind in ('send_web_request', 'send_mail')),
  events text[] not null default '{}',
  -- send_web_request: the URL and the sealed signing secret
  url text check (length(url) <= 2000),
  secret bytea,
  -- send_mail: the recipients
  mail_to text[],
  active boolean not null default true,
  created_by uuid references users on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (task_id, name),
  check ((kind = 'send_web_request') = (url is not null and secret is not null)),
  check ((kind = 'send_mail') = (mail_to is not null))
);

-- One delivery of one event to one webhook or task action. Its id is X-Service-Delivery, the same
-- on every attempt. status is the WebhookDelivery actor's state (actors/webhookDelivery.ts).
create table event_deliveries (
  id uuid primary key,
  event_id uuid not null references event_outbox on delete cascade,
  webhook_id uuid references webhooks on delete cascade,
  task_action_id uuid references task_actions on delete cascade,
  status text not null default 'pending' check (status in ('pending', 'attempting', 'retrying', 'delivered', 'dead')),
  attempts smallint not null default 0,
  max_attempts smallint not null default 6 check (max_attempts between 1 and 20),
  next_attempt_at timestamptz,
  -- the instance key (advisory lock) of the server process running the current attempt; a key
  -- whose lock is gone means that process died mid-attempt (storage/events/instanceLease.ts)
  claimed_by integer,
  last_response_status smallint,
  last_error text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  finished_at timestamptz,
  check ((webhook_id is null) <> (task_action_id is null))
);
create index event_deliveries_webhook on event_deliveries (webhook_id, created_at desc) where webhook_id is not null;
create index event_deliveries_task_action on event_deliveries (task_action_id, created_at desc) where task_action_id is not null;
create index event_deliveries_event on event_deliveries (event_id);
create index event_deliveries_attempting on event_deliveries (claimed_by) where status = 'attempting';
create index event_deliveries_finished on event_deliveries (finished_at) where finished_at is not null;

create table event_delivery_attempts (
  delivery_id uuid not null references event_deliveries on delete cascade,
  attempt smallint not null,
  started_at timestamptz not null,
  finished_at timestamptz not null,
  response_status smallint,
  error text,
  -- the first bytes of the receiver's answer, for the delivery history
  response_excerpt text,
  -- when the next attempt was scheduled after this one failed (null: none)
  next_attempt_at timestamptz,
  primary key (delivery_id, attempt)
);

-- Bus messages larger than a NOTIFY payload (8000 bytes): NOTIFY carries the row id instead.
-- Rows live a few minutes; the relay deletes old ones.
create table event_relay (
  id bigserial primary key,
  payload text not null,
  created_at timestamptz not null default now()
);
