// docs/architecture.md, "Who owns the SQL": the caches table is read and written by
// storage/db/caches.ts alone. A query of another aggregate may join it for a name; no module
// outside storage/ selects from, inserts into, updates or deletes from it.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import t from 'tap';

const ROOT = join(import.meta.dirname, '..', '..', '..');
const FOLDERS = ['actors', 'supervisors', 'services', 'http', 'cli', 'worker', 'config', 'protocol'];

/** A statement whose own table is caches (a join names it after `join`, which this does not match). */
const CACHES_STATEMENT = /\b(?:from|into|update)\s+caches\b/i;

const sourceFiles = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []);

/** Lines of SQL on caches outside storage/, as `file:line`. */
function cacheQueriesOutsideStorage(): string[] {
  return FOLDERS.flatMap((folder) => sourceFiles(join(ROOT, folder))).flatMap((file) => {
    const name = relative(ROOT, file);
    return readFileSync(file, 'utf8').split('\n').flatMap((line, i) =>
      CACHES_STATEMENT.test(line) && !/^\s*(\/\/|\*)/.test(line) ? [`${name}:${i + 1}`] : []);
  });
}

t.test('no module outside storage/ queries the caches table itself', async (t) => {
  t.same(cacheQueriesOutsideStorage(), []);
});

t.test('the pattern sees statements on caches and lets joins and other tables pass', async (t) => {
  const cases: [string, boolean][] = [
    ['select id from caches where name = ${name}', true],
    ['  from caches c', true],
    ['insert into caches (name) values (1)', true],
    ['update caches set active = false', true],
    ['delete from caches where id = ${id}', true],
    ['left join caches c on c.id = k.cache_id', false],
    ['select * from cache_members', false],
    ['update cached_paths set x = 1', false],
  ];
  for (const [line, hit] of cases) t.equal(CACHES_STATEMENT.test(line), hit, line);
});
