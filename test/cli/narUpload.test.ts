import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { ApiClient } from '../../cli/apiClient.js';
import { chunked, narFileSource, uploadNar, type NarSource } from '../../cli/narUpload.js';
import { dependencyOrder, dumpFrom, pathInfos, runtimeClosure } from '../../cli/localStore.js';
import { startTestKiln } from '../support/kiln.js';
import { signUp } from '../support/accounts.js';
import { startFaultProxy, type Relayed } from '../support/faultProxy.js';
import { buildFixturePaths, nixPathInfo, nixStoreDump, tempDir } from '../support/nixStore.js';

const bufferSource = (bytes: Buffer): NarSource => ({
  size: bytes.length,
  open: (offset) => (async function* () {
    // Odd piece sizes, so chunking has to cut across them.
    for (let i = offset; i < bytes.length; i += 1000) yield bytes.subarray(i, Math.min(bytes.length, i + 1000));
  })(),
});

const offsetOf = (r: Relayed): number => Number(new URL(r.url, 'http://x').searchParams.get('offset'));

const infoOf = (path: string) => {
  const info = nixPathInfo(path);
  return { store_path: path, nar_hash: info.narHash, nar_size: info.narSize, references: info.references };
};

t.test('chunked cuts a stream into equal slices', async (t) => {
  const pieces = async function* () {
    yield Buffer.from('abc');
    yield Buffer.from('defghij');
    yield Buffer.from('k');
  };
  const out: string[] = [];
  for await (const c of chunked(pieces(), Buffer.alloc(4))) out.push(c.toString());
  t.same(out, ['abcd', 'efgh', 'ijk']);
});

t.test('chunked fills one buffer: every slice is a view of it, pieces larger than it too', async (t) => {
  const bytes = Buffer.from(Array.from({ length: 1000 }, (_, i) => i % 251));
  const pieces = async function* () {
    for (const [from, to] of [[0, 3], [3, 40], [40, 41], [41, 600], [600, 1000]] as const) yield bytes.subarray(from, to);
  };
  const into = Buffer.alloc(7);
  let at = 0;
  let elsewhere = 0;
  let wrong = 0;
  for await (const c of chunked(pieces(), into)) {
    if (c.buffer !== into.buffer || c.byteOffset !== into.byteOffset) elsewhere++;
    if (!c.equals(bytes.subarray(at, at + c.length))) wrong++;
    at += c.length;
  }
  t.equal(elsewhere, 0, 'every slice a view of the buffer');
  t.equal(wrong, 0, 'every slice the bytes at its offset');
  t.equal(at, bytes.length);
  await t.rejects(chunked(pieces(), Buffer.alloc(0)).next(), RangeError);
});

t.test('dependencyOrder puts references first and keeps the order otherwise', async (t) => {
  const infos = new Map([
    ['/a', { store_path: '/a', nar_hash: '', nar_size: 1, references: ['/b', '/a'] }],
    ['/b', { store_path: '/b', nar_hash: '', nar_size: 1, references: ['/c'] }],
    ['/c', { store_path: '/c', nar_hash: '', nar_size: 1, references: [] }],
    ['/d', { store_path: '/d', nar_hash: '', nar_size: 1, references: [] }],
  ]);
  t.same(dependencyOrder(['/a', '/d', '/b', '/c'], infos), ['/c', '/b', '/a', '/d']);
});

t.test('the local store: closure, registration, dump from an offset', async (t) => {
  const fx = buildFixturePaths();
  const closure = await runtimeClosure([fx.refs]);
  t.same(closure.sort(), [fx.file, fx.refs].sort());
  const infos = await pathInfos(closure);
  t.same(dependencyOrder(closure, infos), [fx.file, fx.refs]);
  t.equal(infos.get(fx.refs)!.nar_size, nixPathInfo(fx.refs).narSize);
  const whole = nixStoreDump(fx.tree);
  const chunks: Buffer[] = [];
  for await (const c of dumpFrom(fx.tree, 100_001)) chunks.push(Buffer.from(c));
  t.ok(Buffer.concat(chunks).equals(whole.subarray(100_001)), 'the bytes after the offset');
  await t.rejects(pathInfos(['/nix/store/00000000000000000000000000000000-missing']), /not a valid path|nix path-info/);
});

t.test('uploadNar: chunks, resume from what the server holds, retries', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  await kiln.api('PUT', '/caches', { token: ada.token, body: { name: 'main' } });
  const fx = buildFixturePaths();
  const client = new ApiClient({ server: kiln.url, token: ada.token });
  const nar = nixStoreDump(fx.tree);
  const hash = fx.tree.slice(11, 43);

  t.test('a NAR far larger than a chunk goes up in many chunks', async (t) => {
    const seen: number[] = [];
    const result = await uploadNar(client, 'main', infoOf(fx.tree), bufferSource(nar), { chunkBytes: 16_384, progress: { update: (n) => void seen.push(n), finish: () => undefined } });
    t.equal(result.status, 'added');
    t.equal(seen.length, Math.ceil(nar.length / 16_384));
    t.equal(seen.at(-1), nar.length);
    await kiln.api('DELETE', `/caches/main/nars/${hash}`, { token: ada.token });
  });

  t.test('an earlier run left bytes staged: the upload goes on from there', async (t) => {
    const first = await fetch(`${kiln.url}/api/v1/caches/main/nars/${hash}/chunk?offset=0`, {
      method: 'PUT', headers: { authorization: `Bearer ${ada.token}` }, body: nar.subarray(0, 50_000),
    });
    t.equal(first.status, 200);
    const sent: number[] = [];
    const source: NarSource = { size: nar.length, open: (offset) => (sent.push(offset), bufferSource(nar).open(offset)) };
    const result = await uploadNar(client, 'main', infoOf(fx.tree), source, { chunkBytes: 32_768 });
    t.equal(result.status, 'added');
    t.same(sent, [0, 50_000], 'tried from 0, told 50000 are staged, went on from there');
    await kiln.api('DELETE', `/caches/main/nars/${hash}`, { token: ada.token });
  });

  t.test('staged bytes of another NAR: abandoned and uploaded again, once', async (t) => {
    const other = Buffer.from(nar);
    other[200] = other[200]! ^ 0xff;
    await fetch(`${kiln.url}/api/v1/caches/main/nars/${hash}/chunk?offset=0`, {
      method: 'PUT', headers: { authorization: `Bearer ${ada.token}` }, body: other,
    });
    const result = await uploadNar(client, 'main', infoOf(fx.tree), bufferSource(nar), { chunkBytes: 65_536 });
    t.equal(result.status, 'added');
    await kiln.api('DELETE', `/caches/main/nars/${hash}`, { token: ada.token });
  });

  t.test('a connection that fails mid-upload: asks how far it got and goes on', async (t) => {
    let puts = 0;
    const proxy = await startFaultProxy(t, kiln.url, (r) => (r.method === 'PUT' && ++puts === 3 ? 'drop' : 'relay'));
    const result = await uploadNar(new ApiClient({ server: proxy.url, token: ada.token }), 'main', infoOf(fx.tree), bufferSource(nar), {
      chunkBytes: 40_000, backoffMs: () => 1,
    });
    t.equal(result.status, 'added');
    t.ok(puts > 3);
    const dropped = proxy.seen.findIndex((r) => r.method === 'PUT' && offsetOf(r) === 80_000);
    t.equal(proxy.seen[dropped + 1]?.method, 'GET', 'asked how far the upload got');
    await kiln.api('DELETE', `/caches/main/nars/${hash}`, { token: ada.token });
  });

  t.test('chunks cut from one reused buffer are the NAR\'s bytes, across boundaries, failures and resumes', async (t) => {
    // Chunks of 1500 bytes. The 5th PUT is dropped (nothing staged), the 9th is staged but its answer
    // lost, and of the 13th only 100 bytes are staged, its answer lost too: from then on the chunks
    // start at offsets no multiple of 1500.
    const narFile = join(tempDir('kiln-nar-upload-'), 'tree.nar');
    writeFileSync(narFile, nar);
    const fromFile = narFileSource(narFile, nar.length);
    const sources: [string, (opened: number[]) => NarSource][] = [
      ['a stream of pieces of 1000 bytes', (opened) => ({ size: nar.length, open: (offset) => (opened.push(offset), bufferSource(nar).open(offset)) })],
      // Reads of at most 1000 bytes: a chunk takes several.
      ['a file read by position', () => ({ ...fromFile, read: (into, position) => fromFile.read!(into.subarray(0, 1000), position) })],
    ];
    for (const [what, sourceOf] of sources) {
      await t.test(what, async (t) => {
        let puts = 0;
        const proxy = await startFaultProxy(t, kiln.url, (r) => {
          if (r.method !== 'PUT') return 'relay';
          puts++;
          return puts === 5 ? 'drop' : puts === 9 ? 'lose-answer' : puts === 13 ? { truncate: 100 } : 'relay';
        });
        const opened: number[] = [];
        const result = await uploadNar(new ApiClient({ server: proxy.url, token: ada.token }), 'main', infoOf(fx.tree), sourceOf(opened), {
          chunkBytes: 1500, backoffMs: () => 1,
        });
        t.equal(result.status, 'added', 'the server found the NarHash of what it staged');
        const chunks = proxy.seen.filter((r) => r.method === 'PUT');
        t.same(chunks.slice(0, 14).map(offsetOf), [0, 1500, 3000, 4500, 6000, 6000, 7500, 9000, 10_500, 12_000, 13_500, 15_000, 16_500, 16_600],
          'each failure resumed where the server said the upload was');
        if (opened.length > 0) t.same(opened, [0, 6000, 12_000, 16_600], 'the stream re-opened there');
        let wrong = 0;
        for (const c of chunks) if (!c.body.equals(nar.subarray(offsetOf(c), offsetOf(c) + c.body.length))) wrong++;
        t.equal(wrong, 0, 'every chunk sent holds the bytes of the NAR at its offset');
        t.ok(chunks.every((c, i) => c.body.length === 1500 || i === chunks.length - 1), 'whole chunks but the last');
        t.equal(offsetOf(chunks.at(-1)!) + chunks.at(-1)!.body.length, nar.length, 'the last one ends the NAR');
        await kiln.api('DELETE', `/caches/main/nars/${hash}`, { token: ada.token });
      });
    }
  });

  t.test('what the client cannot fix is not retried', async (t) => {
    const wrong = { ...infoOf(fx.file), nar_size: nixPathInfo(fx.file).narSize + 1 };
    await t.rejects(uploadNar(client, 'main', wrong, bufferSource(nixStoreDump(fx.file))), { status: 409, code: 'incomplete_upload' });
    const bad = { ...infoOf(fx.file), nar_hash: infoOf(fx.tree).nar_hash };
    await t.rejects(uploadNar(client, 'main', bad, bufferSource(nixStoreDump(fx.file))), { status: 400, code: 'nar_mismatch' });
    await t.rejects(uploadNar(client, 'nope', infoOf(fx.file), bufferSource(nixStoreDump(fx.file))), { status: 404, code: 'not_found' });
  });
});
