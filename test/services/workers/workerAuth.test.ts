// The handshake's token check (services/workers/workerAuth.ts) against real rows: a verified token is
// remembered (a reconnecting fleet costs one argon2 run per worker), yet a deleted registration
// or another token stops matching at once. (That the second check skips argon2 is measured by
// bench/protoWorkers.bench.ts, not asserted on time here.)
import { randomUUID } from 'node:crypto';
import argon2 from 'argon2';
import t from 'tap';
import { createWorkerAuth } from '../../../services/index.js';
import { testDatabase } from '../../support/db.js';
import { insertProject } from '../../support/modelRows.js';
import { testHello } from '../../support/protoClient.js';
import { PROTOCOL_VERSION } from '../../../protocol/index.js';

t.test('verified tokens are remembered, rows are not', async (t) => {
  const { sql } = await testDatabase(t);
  const project = await insertProject(sql, 'acme', 'app');
  const token = 'a'.repeat(64);
  const [row] = await sql<{ id: string }[]>`
    insert into worker_registrations (project_id, token_hash) values (${project}, ${await argon2.hash(token, { type: argon2.argon2id })}) returning id`;
  const auth = createWorkerAuth(sql, { localWorker: false });
  const hello = { v: PROTOCOL_VERSION as typeof PROTOCOL_VERSION, ...testHello({ workerId: randomUUID() }) };
  t.same(await auth.projectsFor(hello), [project]);
  t.same(await auth.verify(hello, [{ project, token }]), [project]);
  t.same(await auth.verify(hello, [{ project: project.toUpperCase(), token }]), [project], 'again, from memory');
  t.same(await auth.verify(hello, [{ project, token: 'b'.repeat(64) }]), [], 'another token does not match');
  await sql`delete from worker_registrations where id = ${row!.id}`;
  t.same(await auth.verify(hello, [{ project, token }]), [], 'a deleted registration stops matching at once');
});
