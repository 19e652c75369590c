// kiln_store_hash_part (migration 0080): the hash part of a store path by string functions, which
// the output size trigger (record_output_nar_sizes) matches against cached_paths. It must find what
// the regular expression it replaced found: the same text for every path whose last component is
// 32 base-32 characters and a '-', null where that expression gave null, and otherwise (characters
// outside the alphabet) nothing a cached_paths.hash_part can equal.
import t from 'tap';
import { testDatabase } from '../../support/db.js';

const ALPHABET = '0123456789abcdfghijklmnpqrsvwxyz';
const hash = (seed: number) => Array.from({ length: 32 }, (_, i) => ALPHABET[(seed * 7 + i * 13) % 32]).join('');

t.test('the hash part by string functions is the regular expression\'s wherever a hash part can match', async (t) => {
  const { sql } = await testDatabase(t);
  const paths = [
    ...Array.from({ length: 200 }, (_, i) => `/nix/store/${hash(i)}-pkg-${i}`),
    `/gnu/store/${hash(1)}-other-store-dir`, `/nix/store/${hash(2)}-`, `/nix/store/${hash(3)}`, `/nix/store/${hash(4)}-x/sub`,
    `/nix/store/${hash(5).slice(1)}-short`, `/nix/store/${hash(6)}x-long`, `${hash(7)}-no-slash`, `x${hash(11)}-no-slash`, '', '/', 'nopath',
    `/a-b/c/${hash(8)}-name.with.dots`, `/nix/store/${hash(9).toUpperCase()}-upper`, `/nix/store/${hash(10).replace('a', 'e')}-e`,
  ];
  const rows = await sql<{ path: string; by_regex: string | null; by_string: string | null; valid: boolean | null }[]>`
    select path, substring(path from '/([0-9a-df-np-sv-z]{32})-[^/]*$') as by_regex, kiln_store_hash_part(path) as by_string,
           kiln_store_hash_part(path) ~ '^[0-9a-df-np-sv-z]{32}$' as valid
    from unnest(${paths}::text[]) as p(path)`;
  t.equal(rows.length, paths.length);
  const differ = rows.filter((r) => r.by_regex !== r.by_string);
  t.same(differ.filter((r) => r.valid !== false), [], 'where they differ, the string one is no valid hash part (no cached path has it)');
  t.same(differ.map((r) => r.path), [`/nix/store/${hash(9).toUpperCase()}-upper`, `/nix/store/${hash(10).replace('a', 'e')}-e`], 'only outside the alphabet');
  t.equal(rows.filter((r) => r.by_regex !== null).length, 203, 'the well-formed paths have a hash part');
});
