-- Several server processes on one database and one baseDir (docs/binary-cache.md, "More cores")
-- may each receive requests of the same staged upload. The process working on an upload (writing a
-- chunk or a whole file, finalizing, abandoning) names itself here by its instance lease key
-- (server_instances.lock_key, storage/events/instanceLease.ts) and clears it when done. The claim is
-- free when null, or when that process's lease is gone (it died mid-request, SIGKILL included).
alter table staged_uploads add column writer integer check (writer >= 0);
