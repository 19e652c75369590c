// Migration 0082 (docs/builds.md, "The scheduler's data structures"): the rows standing when the
// `ready` flag arrives take it from their readiness counter, so the ready index (now by the flag)
// lists the builds it listed before, and the check holds for them.
import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { migrate, readMigrations } from '../../../storage/index.js';
import { testDatabase } from '../../support/db.js';

t.test('0082 sets ready from inputs_remaining on the rows before it', async (t) => {
  const { sql } = await testDatabase(t, { migrated: false });
  const dir = await mkdtemp(join(tmpdir(), 'kiln-migrations-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const all = await readMigrations();
  const source = join(import.meta.dirname, '../../../storage/db/migrations');
  for (const m of all.filter((m) => m.name < '0082')) await copyFile(join(source, m.name), join(dir, m.name));
  await migrate(sql, { directory: dir });

  const build = async (name: string, status: string, remaining: number) => {
    const [d] = await sql<{ id: string }[]>`
      insert into derivations (drv_path, name, system, outputs) values (${`/nix/store/${name}.drv`}, ${name}, 'x86_64-linux', '{}') returning id`;
    await sql`insert into derivation_builds (derivation_id, status, inputs_remaining) values (${d!.id}, ${status}, ${remaining})`;
  };
  await build('waiting', 'queued', 2);
  await build('ready', 'queued', 0);
  await build('failed-input', 'failed', 1);
  await build('done', 'completed', 0);

  t.same((await migrate(sql)).applied.filter((n) => n.startsWith('0082')), [all.find((m) => m.name.startsWith('0082'))!.name]);
  const rows = await sql<{ name: string; ready: boolean }[]>`
    select d.name, db.ready from derivation_builds db join derivations d on d.id = db.derivation_id order by d.name`;
  t.same(rows, [
    { name: 'done', ready: true }, { name: 'failed-input', ready: false }, { name: 'ready', ready: true }, { name: 'waiting', ready: false },
  ]);
  await sql`alter table derivation_builds validate constraint derivation_builds_ready_check`;
  t.pass('the check holds for every row');
});
