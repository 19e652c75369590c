// The handshake's token check (services/workers/workerAuth.ts) against real rows: tokens are
// kept as SHA-256; a row from before, still argon2id, verifies once and is rewritten as SHA-256;
// another token never matches, and a deleted registration stops matching at once. (That 1,000
// handshakes now take seconds is measured by bench/protoWorkers.bench.ts, not asserted on time.)
import { createHash, randomUUID } from 'node:crypto';
import argon2 from 'argon2';
import t from 'tap';
import { BuildServerPasses, createWorkerAuth } from '../../../services/index.js';
import { testDatabase } from '../../support/db.js';
import { insertProject } from '../../support/modelRows.js';
import { testHello } from '../../support/protoClient.js';
import { PROTOCOL_VERSION } from '../../../protocol/index.js';

const sha256Hex = (s: string) => createHash('sha256').update(s).digest('hex');

t.test('SHA-256 rows match; legacy argon2 rows are rewritten on the first success', async (t) => {
  const { sql } = await testDatabase(t);
  const project = await insertProject(sql, 'acme', 'app');
  const token = 'a'.repeat(64);
  const [legacy] = await sql<{ id: string }[]>`
    insert into worker_registrations (project_id, token_hash) values (${project}, ${await argon2.hash(token, { type: argon2.argon2id })}) returning id`;
  const auth = createWorkerAuth(sql, { localWorker: false });
  const hello = { v: PROTOCOL_VERSION as typeof PROTOCOL_VERSION, ...testHello({ workerId: randomUUID() }) };
  t.same(await auth.projectsFor(hello), [project]);
  t.same(await auth.verify(hello, [{ project, token: 'b'.repeat(64) }]), [], 'another token does not match the argon2 row');
  t.match((await sql<{ token_hash: string }[]>`select token_hash from worker_registrations where id = ${legacy!.id}`)[0]!.token_hash, /^\$argon2id\$/,
    'a failed attempt leaves the row as it was');
  t.same(await auth.verify(hello, [{ project, token }]), [project]);
  const [rewritten] = await sql<{ token_hash: string }[]>`select token_hash from worker_registrations where id = ${legacy!.id}`;
  t.equal(rewritten!.token_hash, sha256Hex(token), 'the argon2 row now holds the SHA-256');
  t.same(await auth.verify(hello, [{ project: project.toUpperCase(), token }]), [project], 'again, against the SHA-256');
  t.same(await auth.verify(hello, [{ project, token: 'b'.repeat(64) }]), [], 'another token does not match the SHA-256 row');
  t.same(await auth.verify(hello, [{ project, token: sha256Hex(token) }]), [], 'presenting the stored hash itself does not match');
  await sql`delete from worker_registrations where id = ${legacy!.id}`;
  t.same(await auth.verify(hello, [{ project, token }]), [], 'a deleted registration stops matching at once');
});

t.test('a row holding neither form never matches', async (t) => {
  const { sql } = await testDatabase(t);
  const project = await insertProject(sql, 'acme', 'app');
  await sql`insert into worker_registrations (project_id, token_hash) values (${project}, 'x')`;
  const auth = createWorkerAuth(sql, { localWorker: false });
  const hello = { v: PROTOCOL_VERSION as typeof PROTOCOL_VERSION, ...testHello({ workerId: randomUUID() }) };
  t.same(await auth.verify(hello, [{ project, token: 'x' }]), []);
});

t.test('a build server\'s worker answers only to its pass: its projects, its token, no open mode', async (t) => {
  const { sql } = await testDatabase(t);
  const project = await insertProject(sql, 'acme', 'app');
  const other = await insertProject(sql, 'evil', 'app');
  const passes = new BuildServerPasses();
  const auth = createWorkerAuth(sql, { localWorker: true, passes });
  const serverId = randomUUID();
  const hello = { v: PROTOCOL_VERSION as typeof PROTOCOL_VERSION, ...testHello({ workerId: serverId }) };
  const token = passes.admit(serverId, [project]);
  t.same(await auth.projectsFor(hello), [project], 'challenged with its organization\'s projects only');
  t.same(await auth.verify(hello, [{ project, token: 'b'.repeat(64) }]), [], 'another token does not pass');
  t.same(await auth.verify(hello, [{ project: other, token }]), [], 'its token opens no other project');
  t.same(await auth.verify(hello, [{ project: project.toUpperCase(), token }]), [project]);
  t.equal(await auth.openModeProjects(hello, true), null, 'open mode is refused for its id, even on loopback');
  const next = passes.admit(serverId, [project]);
  t.same(await auth.verify(hello, [{ project, token }]), [], 'a new launch\'s pass replaces the old token');
  t.same(await auth.verify(hello, [{ project, token: next }]), [project]);
  passes.revoke(serverId);
  t.same(await auth.verify(hello, [{ project, token: next }]), [], 'a revoked pass opens nothing');
});
