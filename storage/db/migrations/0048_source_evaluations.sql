-- Evaluations of an uploaded source tree (issue 25, `kiln build`; docs/builds.md "Evaluating a
-- source upload"): the evaluation names the upload instead of a commit, and the worker fetches the
-- tarball through a fetch token the scheduler mints at each dispatch (only its SHA-256 is kept,
-- like the uploader's token, which is shown once and cannot be handed to a worker later).
alter table evaluations add column source_upload_id uuid references source_uploads on delete set null;
-- the upload's SHA-256, kept when the upload is swept: a restart then says the source is gone
alter table evaluations add column source_sha256 text check (source_sha256 ~ '^[0-9a-f]{64}$');
create index evaluations_source_upload on evaluations (source_upload_id) where source_upload_id is not null;
alter table source_uploads add column job_token_hash text;
