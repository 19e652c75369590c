// Migration 0079's backfill (docs/builds.md, "Whose failure"): a scoped failure standing when the
// table arrives is kept for its organization only where failed_for names one: the record holds the
// last failure, and of several organizations' it cannot say whose, so none reads another's.
import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { migrate, readMigrations } from '../../../storage/index.js';
import { testDatabase } from '../../support/db.js';

t.test('0079 keeps a standing scoped failure for a sole organization, and none where several share it', async (t) => {
  const { sql } = await testDatabase(t, { migrated: false });
  const dir = await mkdtemp(join(tmpdir(), 'kiln-migrations-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const all = await readMigrations();
  const source = join(import.meta.dirname, '../../../storage/db/migrations');
  for (const m of all.filter((m) => m.name < '0079')) await copyFile(join(source, m.name), join(dir, m.name));
  await migrate(sql, { directory: dir });

  const org = async (name: string) => (await sql<{ id: string }[]>`
    insert into organizations (name, ssh_public_key, ssh_private_key) values (${name}, 'ssh-ed25519 AAAA test', ${Buffer.alloc(32)}) returning id`)[0]!.id;
  const acme = await org('acme');
  const beta = await org('beta');
  const failed = async (name: string, failedFor: string[]) => {
    const [d] = await sql<{ id: string }[]>`
      insert into derivations (drv_path, name, system, outputs) values (${`/nix/store/${name}.drv`}, ${name}, 'x86_64-linux', '{}') returning id`;
    return (await sql<{ id: string }[]>`
      insert into derivation_builds (derivation_id, status, attempts, failed_for, failure_class, failure_reason, failure_message)
      values (${d!.id}, 'failed', 2, ${`{${failedFor.join(',')}}`}::uuid[], 'FailedPermanent', 'builder_failed', ${`${name} failed`}) returning id`)[0]!.id;
  };
  const sole = await failed('sole', [acme]);
  const shared = await failed('shared', [acme, beta]);

  t.same((await migrate(sql)).applied.filter((n) => n.startsWith('0079')), [all.find((m) => m.name.startsWith('0079'))!.name]);
  const kept = await sql`select derivation_build_id, organization_id, failure_message, failure_attempt from derivation_build_scoped_failures`;
  t.same(kept, [{ derivation_build_id: sole, organization_id: acme, failure_message: 'sole failed', failure_attempt: 2 }], 'the sole organization\'s, with its attempt');
  t.notOk(kept.some((k) => k.derivation_build_id === shared), 'none of the shared one\'s');
});
