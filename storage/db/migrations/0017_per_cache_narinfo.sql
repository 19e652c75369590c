-- What a narinfo says belongs to each cache's copy (issue 15; DESIGN.md, "Every tenant may be
-- hostile"). Until now a cached_paths row was shared by every cache holding the same NAR of a store
-- path, (hash_part, nar_hash), and kept the first uploader's StorePath, References, Deriver and CA:
-- a tenant uploading first decided what every other cache served, under signatures those caches
-- had made over their own uploader's narinfo. A row is now one version of the whole narinfo: the
-- NAR and what is said about it. Caches whose uploads agree still share one row; an upload that
-- says something else gets its own row. The blob stays shared by FileHash (file_hash), as before.
--
-- Existing rows keep their values, and each key is computed from them: no row changes meaning.

-- The identity of what a narinfo says about a NAR, apart from the NAR itself. JSON keeps the fields
-- apart unambiguously (a null is not the text "null"). Immutable in effect: the JSON text of text
-- values and the UTF-8 encoding do not depend on any setting.
create function cached_path_narinfo_key(store_path text, refs text[], deriver text, ca text) returns text
  language sql immutable parallel safe
  as $$ select encode(sha256(convert_to(json_build_array(store_path, refs, deriver, ca)::text, 'UTF8')), 'hex') $$;

alter table cached_paths
  add column narinfo_key text not null generated always as (cached_path_narinfo_key(store_path, refs, deriver, ca)) stored;
alter table cached_paths drop constraint cached_paths_hash_part_nar_hash_key;
alter table cached_paths add constraint cached_paths_narinfo unique (hash_part, nar_hash, narinfo_key);
