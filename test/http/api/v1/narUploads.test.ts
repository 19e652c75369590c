// The REST upload routes against a whole server: chunked with resume, single-shot multipart, and
// every kind of bad input answered with a 4xx that names the problem, storing nothing.
import t from 'tap';
import { acquireUpload, uploadBudgetMachine } from '../../../../actors/index.js';
import { startTestKiln } from '../../../support/kiln.js';
import { signUp } from '../../../support/accounts.js';
import { addCacheMember, createTestCache } from '../../../support/caches.js';
import { countRows, makeTestNar, type TestNar } from '../../../support/narStorage.js';
import { createApiKey, finalize, putChunk, uploadSingle, type HttpAnswer } from '../../../support/narUploads.js';

const infoOf = (nar: TestNar) => ({
  store_path: nar.info.storePath,
  nar_hash: nar.info.narHash,
  nar_size: nar.info.narSize,
  references: nar.info.references,
});

async function chunked(kiln: Parameters<typeof putChunk>[0], token: string, cache: string, nar: TestNar, size = 700): Promise<HttpAnswer> {
  for (let offset = 0; offset < nar.nar.length; offset += size) {
    const put = await putChunk(kiln, token, cache, nar.hash, offset, nar.nar.subarray(offset, offset + size));
    if (put.status !== 200) return put;
  }
  return finalize(kiln, token, cache, nar.hash, infoOf(nar));
}

t.test('REST uploads', async (t) => {
  const kiln = await startTestKiln(t, { 'nar.maxUploadSize': 256 * 1024, 'upload.restWaitSecs': 1, 'upload.bytesBudget': 4 << 20 });
  const ada = await signUp(kiln, 'ada');
  const bob = await signUp(kiln, 'bob');
  const cache = await createTestCache(kiln.sql, 'main', { ownerId: ada.id });
  const narinfoOf = (hash: string) => fetch(`${kiln.url}/cache/main/${hash}.narinfo`, { headers: { authorization: `Basic ${Buffer.from(`x:${ada.token}`).toString('base64')}` } });

  t.test('chunked, then finalize; the narinfo is served at once', async (t) => {
    const nar = await makeTestNar(t, { f: 'chunked upload\n'.repeat(200) });
    const done = await chunked(kiln, ada.token, 'main', nar);
    t.equal(done.status, 200);
    t.match(done.body.message, { store_path: nar.info.storePath, nar_hash: nar.info.narHash, nar_size: nar.info.narSize, status: 'added' });
    t.equal((await narinfoOf(nar.hash)).status, 200);
    t.match((await finalize(kiln, ada.token, 'main', nar.hash, infoOf(nar))).body.message, { status: 'held' }, 'finalize again: held');
  });

  t.test('single shot, either part first', async (t) => {
    for (const narFirst of [false, true]) {
      const nar = await makeTestNar(t, { f: `single shot ${narFirst}\n` });
      const parts = narFirst ? { nar: nar.nar, narinfo: infoOf(nar) } : { narinfo: infoOf(nar), nar: nar.nar };
      const res = await uploadSingle(kiln, ada.token, 'main', parts);
      t.equal(res.status, 200, JSON.stringify(res.body));
      t.equal((res.body.message as { status: string }).status, 'added');
      t.equal((await narinfoOf(nar.hash)).status, 200);
    }
  });

  t.test('a wrong offset appends nothing and says where the upload stands', async (t) => {
    const nar = await makeTestNar(t, { f: 'offsets\n'.repeat(300) });
    t.equal((await putChunk(kiln, ada.token, 'main', nar.hash, 0, nar.nar.subarray(0, 1000))).status, 200);
    const wrong = await putChunk(kiln, ada.token, 'main', nar.hash, 400, nar.nar.subarray(400, 900));
    t.equal(wrong.status, 409);
    t.equal(wrong.body.code, 'offset_mismatch');
    t.equal(wrong.headers.get('upload-offset'), '1000');
    t.match(wrong.body.message, /1000 bytes are staged/);
    const state = await kiln.api<{ bytes_staged: number }>('GET', `/caches/main/nars/${nar.hash}/upload`, { token: ada.token });
    t.equal(state.message.bytes_staged, 1000, 'nothing was appended');
    const early = await finalize(kiln, ada.token, 'main', nar.hash, infoOf(nar));
    t.equal(early.status, 409, 'finalize before the end');
    t.equal(early.body.code, 'incomplete_upload');
    t.equal(early.headers.get('upload-offset'), '1000');
    t.equal((await putChunk(kiln, ada.token, 'main', nar.hash, 1000, nar.nar.subarray(1000))).status, 200, 'resumes at the staged count');
    t.equal((await finalize(kiln, ada.token, 'main', nar.hash, infoOf(nar))).status, 200);
  });

  t.test('a NAR that does not match, or a narinfo for another path: 400, nothing stored, staging kept', async (t) => {
    const nar = await makeTestNar(t, { f: 'mismatch\n' });
    t.equal((await putChunk(kiln, ada.token, 'main', nar.hash, 0, nar.nar)).status, 200);
    const before = await countRows(kiln.sql);
    const badHash = await finalize(kiln, ada.token, 'main', nar.hash, { ...infoOf(nar), nar_hash: 'sha256:1b8m03r63zqhnjf7l5wnldhh7c134ap5vpj0850ymkq1iyzicy5s' });
    t.equal(badHash.status, 400);
    t.equal(badHash.body.code, 'nar_mismatch');
    t.match(badHash.body.message, /^NarHash: the NAR hashes to sha256:\w+, the narinfo says sha256:1b8m03r6/);
    const other = await makeTestNar(t, { f: 'other\n' });
    const wrongPath = await finalize(kiln, ada.token, 'main', nar.hash, { ...infoOf(nar), store_path: other.info.storePath });
    t.equal(wrongPath.status, 400);
    t.equal(wrongPath.body.code, 'store_path_mismatch');
    const badField = await finalize(kiln, ada.token, 'main', nar.hash, { ...infoOf(nar), nar_hash: 'md5:abc' });
    t.equal(badField.status, 400);
    t.equal(badField.body.code, 'invalid_narinfo');
    t.match(badField.body.message, /^narinfo nar_hash: /);
    const notJson = await finalize(kiln, ada.token, 'main', nar.hash, { store_path: 5 });
    t.equal(notJson.body.code, 'invalid_body');
    t.same(await countRows(kiln.sql), before, 'no rows came of it');
    t.equal((await finalize(kiln, ada.token, 'main', nar.hash, infoOf(nar))).status, 200, 'the staged bytes are still good');
  });

  t.test('garbage instead of a NAR', async (t) => {
    const nar = await makeTestNar(t, { f: 'garbage\n' });
    const garbage = Buffer.from('this is not a NAR at all; it is merely some text of some length');
    const res = await uploadSingle(kiln, ada.token, 'main', { narinfo: { ...infoOf(nar), nar_size: garbage.length }, nar: garbage });
    t.equal(res.status, 400);
    t.equal(res.body.code, 'invalid_nar');
    t.match(res.body.message, /^invalid NAR at byte \d+: /);
  });

  t.test('a single-shot NAR shorter than its nar_size: 400 nar_mismatch, nothing stored', async (t) => {
    const nar = await makeTestNar(t, { f: 'short of its size\n'.repeat(100) });
    const before = await countRows(kiln.sql);
    const size = nar.nar.length;
    // A whole, valid NAR announced longer (its check pass succeeds; it used to end inside a frame: 500), and cut ones.
    for (const [bytes, announced] of [[size, size + 1], [size, size + 70_000], [1, size], [Math.floor(size / 2), size], [size - 1, size]] as const) {
      const res = await uploadSingle(kiln, ada.token, 'main', { narinfo: { ...infoOf(nar), nar_size: announced }, nar: nar.nar.subarray(0, bytes) });
      t.same([res.status, res.body.code], [400, 'nar_mismatch'], `${bytes} bytes, nar_size ${announced}: ${JSON.stringify(res.body)}`);
      t.match(res.body.message, new RegExp(`^NarSize: the NAR has ${bytes} bytes, the narinfo says ${announced}$`));
    }
    t.same(await countRows(kiln.sql), before, 'no rows came of it');
    t.equal((await narinfoOf(nar.hash)).status, 404);
    t.equal((await uploadSingle(kiln, ada.token, 'main', { narinfo: infoOf(nar), nar: nar.nar })).status, 200, 'the whole NAR goes in');
  });

  t.test('missing or malformed parts', async (t) => {
    const nar = await makeTestNar(t, { f: 'parts\n' });
    const noNarinfo = await uploadSingle(kiln, ada.token, 'main', { nar: nar.nar });
    t.same([noNarinfo.status, noNarinfo.body.code], [400, 'invalid_multipart']);
    t.match(noNarinfo.body.message, /no narinfo part/);
    const noNar = await uploadSingle(kiln, ada.token, 'main', { narinfo: infoOf(nar) });
    t.match([noNar.status, noNar.body.code, noNar.body.message], [400, 'invalid_multipart', /no nar part/]);
    const notMultipart = await fetch(`${kiln.url}/api/v1/caches/main/nars`, { method: 'POST', headers: { authorization: `Bearer ${ada.token}`, 'content-type': 'application/json' }, body: '{}' });
    t.equal(notMultipart.status, 400);
    t.match(((await notMultipart.json()) as { message: string }).message, /expected Content-Type multipart\/form-data/);
  });

  t.test('nar.maxUploadSize: 413 before or while the bytes arrive', async (t) => {
    const nar = await makeTestNar(t, { f: 'big' });
    const big = Buffer.alloc(300 * 1024);
    const chunk = await putChunk(kiln, ada.token, 'main', nar.hash, 0, big);
    t.equal(chunk.status, 413);
    const past = await putChunk(kiln, ada.token, 'main', nar.hash, 200 * 1024, Buffer.alloc(100 * 1024));
    t.match([past.status, past.body.code], [413, 'nar_too_large']);
    const fin = await finalize(kiln, ada.token, 'main', nar.hash, { ...infoOf(nar), nar_size: 300 * 1024 });
    t.match([fin.status, fin.body.code], [413, 'nar_too_large']);
    const single = await uploadSingle(kiln, ada.token, 'main', { narinfo: infoOf(nar), nar: big });
    t.equal(single.status, 413);
    t.equal(single.body.code, 'nar_too_large');
  });

  t.test('who may upload', async (t) => {
    const nar = await makeTestNar(t, { f: 'permissions\n' });
    const anonymous = await fetch(`${kiln.url}/api/v1/caches/main/nars/${nar.hash}/chunk?offset=0`, { method: 'PUT', body: nar.nar });
    t.equal(anonymous.status, 401);
    const stranger = await putChunk(kiln, bob.token, 'main', nar.hash, 0, nar.nar);
    t.match([stranger.status, stranger.body.code], [404, 'not_found'], 'a private cache is not revealed');
    await addCacheMember(kiln.sql, cache.id, bob.id, 'View');
    const viewer = await putChunk(kiln, bob.token, 'main', nar.hash, 0, nar.nar);
    t.match([viewer.status, viewer.body.code, viewer.body.message], [403, 'forbidden', /writeStore/]);
    const viewKey = await createApiKey(kiln, ada.token, 'view-only', ['viewCache']);
    const keyed = await putChunk(kiln, viewKey, 'main', nar.hash, 0, nar.nar);
    t.equal(keyed.status, 403, "an API key acts with its own permissions only");
    const writeKey = await createApiKey(kiln, ada.token, 'ci', ['viewCache', 'writeStore']);
    t.equal((await putChunk(kiln, writeKey, 'main', nar.hash, 0, nar.nar)).status, 200);
    t.equal((await finalize(kiln, writeKey, 'main', nar.hash, infoOf(nar))).status, 200);
  });

  t.test('a disabled cache takes no uploads', async (t) => {
    await createTestCache(kiln.sql, 'off', { ownerId: ada.id });
    await kiln.sql`update caches set active = false where name = 'off'`;
    const nar = await makeTestNar(t, { f: 'off\n' });
    const res = await putChunk(kiln, ada.token, 'off', nar.hash, 0, nar.nar);
    t.match([res.status, res.body.code], [409, 'cache_inactive']);
  });

  t.test('an upload waiting longer than upload.restWaitSecs: 503 with Retry-After', async (t) => {
    const budget = kiln.root.lookup('upload-budget', uploadBudgetMachine);
    if (!budget) throw new Error('no upload budget actor');
    // All of upload.bytesBudget in one permit: every later request waits for bytes.
    const held = await acquireUpload(budget, { bytes: 4 << 20 });
    try {
      const nar = await makeTestNar(t, { f: 'busy\n' });
      const res = await putChunk(kiln, ada.token, 'main', nar.hash, 0, nar.nar);
      t.match([res.status, res.body.code], [503, 'upload_busy']);
      t.equal(res.headers.get('retry-after'), '1');
      t.match(res.body.message, /no upload permit came within 1 s \(upload.restWaitSecs\)/);
      const state = await kiln.api('GET', `/caches/main/nars/${nar.hash}/upload`, { token: ada.token });
      t.equal(state.status, 404, 'nothing was staged');
    } finally {
      held.release();
    }
  });

  t.test('abandoning a staged upload', async (t) => {
    const nar = await makeTestNar(t, { f: 'abandon\n' });
    await putChunk(kiln, ada.token, 'main', nar.hash, 0, nar.nar.subarray(0, 10));
    const gone = await kiln.api('DELETE', `/caches/main/nars/${nar.hash}/upload`, { token: ada.token });
    t.same(gone.message, { abandoned: true });
    const state = await kiln.api('GET', `/caches/main/nars/${nar.hash}/upload`, { token: ada.token });
    t.match([state.status, state.code], [404, 'no_staged_upload']);
    t.equal((await putChunk(kiln, ada.token, 'main', nar.hash, 0, nar.nar)).status, 200, 'a fresh start at 0');
  });
});
