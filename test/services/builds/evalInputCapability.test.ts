// The shared evaluation cache's capability as the scheduler hands it out (docs/eval-cache.md): every
// dispatch of an evaluation carries `inputCache` {url, token} for that evaluation, written with the
// dispatch's phase change; the token answers while the evaluation runs and stops answering once its
// result is in or it goes back to the queue; a second dispatch replaces it. What a dispatch may
// upload: only the hashes its query found missing, each once, within its byte budget, and an
// upload still streaming when the evaluation ends leaves nothing.
import t from 'tap';
import { createHash } from 'node:crypto';
import { startTestKiln, type TestKiln } from '../../support/kiln.js';
import { subscribedProject } from '../../support/subscribedProject.js';
import { handshake, testHello } from '../../support/protoClient.js';
import { eventually } from '../../support/eventually.js';
import { evalInputCacheService, mintInputCache } from '../../../services/builds/evalInputCache.js';

type Access = { url: string; token: string };
const sha256 = (data: string | Uint8Array) => createHash('sha256').update(data).digest('hex');
const query = (cap: Access, narHashes: string[]) => fetch(`${cap.url}/query?token=${cap.token}`, {
  method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ narHashes }),
});
const presentOf = async (cap: Access, narHashes: string[]) => ((await (await query(cap, narHashes)).json()) as { message: { present: string[] } }).message.present;
const put = async (cap: Access, body: string, hash = sha256(body)) => {
  const res = await fetch(`${cap.url}/${hash}?token=${cap.token}`, { method: 'PUT', body });
  return { status: res.status, body: (await res.json()) as { code?: string; message: unknown } };
};

t.test('each evaluation job carries a capability valid while the evaluation runs', async (t) => {
  const kiln = await startTestKiln(t, { localWorker: true });
  const { token, projectId } = await subscribedProject(kiln);
  const worker = await handshake(`ws://127.0.0.1:${kiln.port}/proto`, testHello());
  t.teardown(() => worker.close());
  await worker.next('welcome');
  const evaluated = await kiln.api<string>('POST', `/tasks/${projectId}/default/evaluate`, { token, body: { commit: 'a'.repeat(40) } });
  t.equal(evaluated.status, 200, String(evaluated.message));
  const tokenHash = async () => (await kiln.sql<{ input_cache_token_hash: string | null }[]>`
    select input_cache_token_hash from evaluations where id = ${evaluated.message}`)[0]!.input_cache_token_hash;

  const refused = await worker.next('evalJob');
  t.equal(refused.inputCache?.url, `${kiln.url}/eval-inputs/${evaluated.message}`);
  t.equal(await tokenHash(), sha256(refused.inputCache!.token), 'the token\'s hash was written by the dispatch, before the job was sent');
  t.equal((await query(refused.inputCache!, [])).status, 200);
  worker.send({ t: 'jobRefused', jobId: refused.jobId, refusal: 'busy', message: 'not now' });
  await eventually(async () => (await kiln.api<{ phase: string }>('GET', `/evals/${evaluated.message}`, { token })).message,
    { until: (e) => e.phase === 'queued', message: 'the refused evaluation went back to the queue' });
  t.equal(await tokenHash(), null, 'back in the queue, the evaluation holds no capability');

  // the refusal pause over, the same worker gets it again with a new token
  const job = await worker.next('evalJob');
  worker.send({ t: 'jobAccepted', jobId: job.jobId });
  t.not(job.inputCache!.token, refused.inputCache!.token);
  const res = await query(job.inputCache!, ['a'.repeat(64)]);
  t.equal(res.status, 200, 'the token answers while the evaluation runs');
  t.same(((await res.json()) as { message: unknown }).message, { present: [] });
  t.equal((await query({ ...job.inputCache!, token: `${job.inputCache!.token.slice(0, -1)}x` }, [])).status, 404, 'another token does not');
  t.equal((await query(refused.inputCache!, [])).status, 404, 'nor does the earlier dispatch\'s');
  // an account is no capability: the owner's own session, as a header or as the token, reads nothing
  const asAccount = await fetch(`${job.inputCache!.url}/query`, {
    method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify({ narHashes: [] }),
  });
  t.equal(asAccount.status, 404, 'the project owner\'s session in the Authorization header');
  t.equal((await query({ url: job.inputCache!.url, token }, [])).status, 404, 'the project owner\'s session as the token');

  worker.send({ t: 'evalResult', jobId: job.jobId, commit: 'a'.repeat(40), derivationCount: 0, attributeCount: 0, errorCount: 0, durationMs: 1 });
  await eventually(async () => (await kiln.api<{ phase: string }>('GET', `/evals/${evaluated.message}`, { token })).message,
    { until: (e) => e.phase !== 'evaluating', message: 'the evaluation left evaluating' });
  t.equal((await query(job.inputCache!, [])).status, 404, 'the token ends with the evaluation');
  t.equal(await tokenHash(), null, 'and is cleared');
});

/** An evaluation that runs (as the scheduler would have left it) with a capability of its own. */
async function runningEvaluation(kiln: TestKiln, projectId: string): Promise<Access & { id: string }> {
  const [row] = await kiln.sql<{ id: string }[]>`
    insert into evaluations (task_id, repository, commit, wildcard, phase)
    select id, 'file:///nonexistent', null, 'packages.*', 'evaluating' from tasks where project_id = ${projectId} and name = 'default'
    returning id`;
  const { access, tokenHash } = mintInputCache(kiln.url, row!.id);
  await kiln.sql`update evaluations set input_cache_token_hash = ${tokenHash} where id = ${row!.id}`;
  return { id: row!.id, ...access };
}

async function stored(kiln: TestKiln): Promise<{ rows: string[]; blobs: number }> {
  const rows = (await kiln.sql<{ nar_hash: string }[]>`select nar_hash from eval_input_blobs order by nar_hash`).map((r) => r.nar_hash);
  let blobs = 0;
  for await (const _ of kiln.nars.blobs.list('eval-inputs/')) blobs++;
  return { rows, blobs };
}

t.test('a dispatch uploads only what its query found missing, each once, within its budget', async (t) => {
  // budget: 4 × nar.maxUploadSize = 4000 bytes, at most eval.cache.maxTotalBytes = 2500
  const kiln = await startTestKiln(t, { localWorker: true, 'nar.maxUploadSize': 1000, 'eval.cache.maxTotalBytes': 2500 });
  const { projectId } = await subscribedProject(kiln);
  const cap = await runningEvaluation(kiln, projectId);
  const nar = (n: number, fill: string) => fill.repeat(n);

  const unasked = await put(cap, nar(10, 'u'));
  t.equal(unasked.status, 409, 'a hash the query never named');
  t.equal(unasked.body.code, 'eval_input_unwanted', String(unasked.body.message));
  t.same(await stored(kiln), { rows: [], blobs: 0 }, 'nothing was kept');

  const [a, b, c] = [nar(900, 'a'), nar(900, 'b'), nar(900, 'c')];
  t.same(await presentOf(cap, [sha256(a), sha256(b), sha256(c)]), []);
  t.same((await put(cap, a)).body.message, { stored: true, size: 900 });
  const again = await put(cap, a);
  t.equal(again.body.code, 'eval_input_unwanted', 'the same hash twice');
  t.same((await put(cap, b)).body.message, { stored: true, size: 900 });
  const over = await put(cap, c);
  t.equal(over.status, 413, 'the third 900 bytes pass the 2500-byte budget');
  t.equal(over.body.code, 'eval_inputs_full', String(over.body.message));
  t.match(String(over.body.message), /may store 2500 bytes .* has stored 1800/);
  t.same(await stored(kiln), { rows: [sha256(a), sha256(b)].sort(), blobs: 2 }, 'the refused upload left nothing');

  const other = await runningEvaluation(kiln, projectId);
  t.same(await presentOf(other, [sha256(a), sha256(c)]), [sha256(a)], 'another evaluation\'s query');
  t.equal((await put(other, a)).body.code, 'eval_input_unwanted', 'it may not upload what the organization has');
  t.same((await put(other, c)).body.message, { stored: true, size: 900 }, 'but what it lacked, within a budget of its own');
});

t.test('an upload still streaming when its evaluation ends leaves no row and no blob', async (t) => {
  const kiln = await startTestKiln(t, { localWorker: true });
  const { projectId } = await subscribedProject(kiln);
  // the service the route calls, on the server's database and blob store: the test holds the body's stream
  const service = evalInputCacheService({ sql: kiln.sql, blobs: kiln.nars.blobs, maxBytes: 1 << 20, maxTotalBytes: 0 });
  const bytes = new TextEncoder().encode('x'.repeat(64 * 1024));
  for (const end of ['completed', 'redispatched'] as const) {
    const cap = await runningEvaluation(kiln, projectId);
    t.same(await presentOf(cap, [sha256(bytes)]), []);
    let started!: () => void;
    const streaming = new Promise<void>((resolve) => { started = resolve; });
    let release!: () => void;
    const released = new Promise<void>((resolve) => { release = resolve; });
    const body = (async function* () {
      // asked for its first bytes: the capability was checked when the upload began
      started();
      yield bytes.subarray(0, 1024);
      await released;
      yield bytes.subarray(1024);
    })();
    const upload = service.store(cap.id, cap.token, sha256(bytes), body).then(() => null, (e: unknown) => e);
    await streaming;
    if (end === 'completed') await kiln.sql`update evaluations set phase = 'completed' where id = ${cap.id}`;
    else await kiln.sql`update evaluations set input_cache_token_hash = ${mintInputCache(kiln.url, cap.id).tokenHash} where id = ${cap.id}`;
    release();
    t.match(await upload, { code: 'not_found' }, `${end}: refused when the row was to be written`);
    t.same(await stored(kiln), { rows: [], blobs: 0 }, `${end}: the bytes stored before the check are deleted`);
  }
});
