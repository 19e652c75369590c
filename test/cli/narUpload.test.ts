import t from 'tap';
import { ApiClient } from '../../cli/apiClient.js';
import { chunked, uploadNar, type NarSource } from '../../cli/narUpload.js';
import { dependencyOrder, dumpFrom, pathInfos, runtimeClosure } from '../../cli/localStore.js';
import { startTestKiln } from '../support/kiln.js';
import { signUp } from '../support/accounts.js';
import { buildFixturePaths, nixPathInfo, nixStoreDump } from '../support/nixStore.js';

const bufferSource = (bytes: Buffer): NarSource => ({
  size: bytes.length,
  open: (offset) => (async function* () {
    // Odd piece sizes, so chunking has to cut across them.
    for (let i = offset; i < bytes.length; i += 1000) yield bytes.subarray(i, Math.min(bytes.length, i + 1000));
  })(),
});

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
  for await (const c of chunked(pieces(), 4)) out.push(c.toString());
  t.same(out, ['abcd', 'efgh', 'ijk']);
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
    const flaky: typeof fetch = async (input, init) => {
      if (init?.method === 'PUT' && ++puts === 3) throw new TypeError('fetch failed', { cause: new Error('socket hang up') });
      return fetch(input, init);
    };
    const result = await uploadNar(new ApiClient({ server: kiln.url, token: ada.token }, flaky), 'main', infoOf(fx.tree), bufferSource(nar), {
      chunkBytes: 40_000, backoffMs: () => 1,
    });
    t.equal(result.status, 'added');
    t.ok(puts > 3);
  });

  t.test('what the client cannot fix is not retried', async (t) => {
    const wrong = { ...infoOf(fx.file), nar_size: nixPathInfo(fx.file).narSize + 1 };
    await t.rejects(uploadNar(client, 'main', wrong, bufferSource(nixStoreDump(fx.file))), { status: 409, code: 'incomplete_upload' });
    const bad = { ...infoOf(fx.file), nar_hash: infoOf(fx.tree).nar_hash };
    await t.rejects(uploadNar(client, 'main', bad, bufferSource(nixStoreDump(fx.file))), { status: 400, code: 'nar_mismatch' });
    await t.rejects(uploadNar(client, 'nope', infoOf(fx.file), bufferSource(nixStoreDump(fx.file))), { status: 404, code: 'not_found' });
  });
});
