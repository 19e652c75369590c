// Deletion semantics (issue 5, item 7): deleting a path from one cache leaves the derivation build
// that produced it alone; deleting it from the last cache marks the build's outputs not cached in
// the same transaction, and the next evaluation reaching the build queues it again.
import t from 'tap';
import { PROTOCOL_VERSION } from '../../../protocol/index.js';
import { recordEvalBatch } from '../../../services/builds/graphRecorder.js';
import { startTestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { insertProject } from '../../support/modelRows.js';
import { makeTestNar } from '../../support/narStorage.js';
import { uploadSingle } from '../../support/narUploads.js';

t.test('the last copy of an output', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  for (const name of ['one', 'two']) await createTestCache(kiln.sql, name, { ownerId: ada.id });
  const nar = await makeTestNar(t, { f: 'an output\n' }, [], 'hello');
  const drvName = `${'a'.repeat(32)}-hello.drv`;
  const drvPath = `/nix/store/${drvName}`;
  for (const cache of ['one', 'two']) {
    const res = await uploadSingle(kiln, ada.token, cache, {
      narinfo: { store_path: nar.info.storePath, nar_hash: nar.info.narHash, nar_size: nar.info.narSize, references: [], deriver: drvName },
      nar: nar.nar,
    });
    t.equal(res.status, 200, JSON.stringify(res.body));
  }
  const [drv] = await kiln.sql<{ id: string }[]>`
    insert into derivations (drv_path, name, system, outputs) values (${drvPath}, 'hello', 'x86_64-linux', ${kiln.sql.json({ out: nar.info.storePath })})
    returning id`;
  await kiln.sql`insert into derivation_builds (derivation_id, status, finished_at) values (${drv!.id}, 'completed', now())`;
  const build = async () => (await kiln.sql<{ status: string; outputs_cached: boolean }[]>`
    select status, outputs_cached from derivation_builds where derivation_id = ${drv!.id}`)[0]!;

  const fromOne = await kiln.api<{ last_copy: boolean }>('DELETE', `/caches/one/nars/${nar.hash}`, { token: ada.token });
  t.equal(fromOne.status, 200);
  t.equal(fromOne.message.last_copy, false);
  t.same(await build(), { status: 'completed', outputs_cached: true }, 'another cache still holds the output');

  const fromTwo = await kiln.api<{ last_copy: boolean }>('DELETE', `/caches/two/nars/${nar.hash}`, { token: ada.token });
  t.equal(fromTwo.message.last_copy, true);
  t.same(await build(), { status: 'completed', outputs_cached: false }, 'marked not cached with the deletion');

  const projectId = await insertProject(kiln.sql, 'acme', 'app');
  const [task] = await kiln.sql<{ id: string }[]>`insert into tasks (project_id, name) values (${projectId}, 'default') returning id`;
  const [evaluation] = await kiln.sql<{ id: string }[]>`
    insert into evaluations (task_id, repository, wildcard, phase) values (${task!.id}, 'file:///dev/null', '*', 'evaluating') returning id`;
  await recordEvalBatch(kiln.events.events, evaluation!.id, {
    v: PROTOCOL_VERSION, t: 'evalBatch', jobId: 'eval:1',
    derivations: [{
      drvPath, name: 'hello', outputs: { out: nar.info.storePath }, inputDrvs: {}, inputSrcs: [], system: 'x86_64-linux',
      requiredSystemFeatures: [], timeoutSecs: null, maxSilentSecs: null, preferLocalBuild: false, fixedOutput: false,
    }],
    attributes: [], errors: [],
  });
  t.same(await build(), { status: 'queued', outputs_cached: true }, 'the next evaluation reaching it queues it again');
});
