// Decompression bombs through `nix copy --to`'s paths: a NAR file that expands far beyond what its
// narinfo declares (or into no NAR at all) is refused with a 4xx naming the problem as soon as the
// decompressed bytes pass the declared NarSize, and storage limits count the NarSize, not the few
// hundred compressed bytes. Nothing is stored either way.
import t from 'tap';
import { startTestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';

// 401 bytes of bzip2 -9 that expand to 500 MiB of zeros (eleven streams of one block each).
const BZIP2_BOMB = Buffer.from(
  'QlpoOTFBWSZTWQ4J4t8BX45AAMAAAAggADCATUZCoCWpCoCXMUFZJlNZDgni3wFfjkAAwAAACCAAMIBNRkKgJakKgJcxQVkmU1kOCeLfAV+OQADAAAAIIAAwgE1GQqAlqQqAlzFBWSZTWQ4J4t8BX45AAMAAAAggADCATUZCoCWpCoCXMUFZJlNZDgni3wFfjkAAwAAACCAAMIBNRkKgJakKgJcxQVkmU1kOCeLfAV+OQADAAAAIIAAwgE1GQqAlqQqAlzFBWSZTWQ4J4t8BX45AAMAAAAggADCATUZCoCWpCoCXMUFZJlNZDgni3wFfjkAAwAAACCAAMIBNRkKgJakKgJcxQVkmU1kOCeLfAV+OQADAAAAIIAAwgE1GQqAlqQqAlzFBWSZTWQ4J4t8BX45AAMAAAAggADCATUZCoCWpCoCXMUFZJlNZDgni3wFfjkAAwAAACCAAMIBNRkKgJakKgJcxQVkmU1lht6HQAJSQQgDAAAAIAAggADDMBSmmBESNiCIkeLuSKcKEhwLtlyg=',
  'base64',
);
const FIVE_HUNDRED_MIB = 500 * 1024 * 1024;

t.test('bzip2 bombs at the nix copy paths', async (t) => {
  const kiln = await startTestKiln(t, { 'nar.maxUploadSize': 510 * 1024 * 1024 });
  const ada = await signUp(kiln, 'ada');
  await createTestCache(kiln.sql, 'pub', { public: true, ownerId: ada.id });
  const small = await createTestCache(kiln.sql, 'small', { public: true, ownerId: ada.id });
  await kiln.sql`update caches set max_storage_bytes = ${1 << 20} where id = ${small.id}`;
  const auth = { authorization: `Basic ${Buffer.from(`nix:${ada.token}`).toString('base64')}` };
  let sequence = 0;

  /** PUTs the bomb as nar/<hash>.nar.bz2, then a narinfo declaring `narSize`; the narinfo's answer. */
  const copyBomb = async (cache: string, narSize: number) => {
    const hash = `${String(++sequence).padStart(4, '0')}${'a'.repeat(28)}`;
    const put = await fetch(`${kiln.url}/cache/${cache}/nar/${hash}.nar.bz2`, { method: 'PUT', body: BZIP2_BOMB, headers: auth });
    t.equal(put.status, 200, 'the compressed file itself is staged');
    const narinfo = [
      `StorePath: /nix/store/${hash}-bomb`, `URL: nar/${hash}.nar.bz2`, 'Compression: bzip2',
      `NarHash: sha256:${'0'.repeat(51)}1`, `NarSize: ${narSize}`, 'References: ', '',
    ].join('\n');
    const res = await fetch(`${kiln.url}/cache/${cache}/${hash}.narinfo`, { method: 'PUT', body: narinfo, headers: auth });
    const body = (await res.json()) as { code?: string; message?: string };
    const served = await fetch(`${kiln.url}/cache/${cache}/${hash}.narinfo`);
    return { status: res.status, code: body.code, message: body.message ?? '', servedStatus: served.status };
  };
  const stored = async () => Number((await kiln.sql<{ n: string }[]>`select count(*) as n from cached_paths`)[0]!.n);

  t.test('declaring a small NarSize: nar_mismatch at the first byte past it', async (t) => {
    const answer = await copyBomb('pub', 1024);
    t.match(answer, { status: 400, code: 'nar_mismatch', servedStatus: 404 });
    t.match(answer.message, /NAR is longer than the announced 1024 bytes/);
  });

  t.test('eight at once: each refused, none decoded past its budget', async (t) => {
    const answers = await Promise.all(Array.from({ length: 8 }, () => copyBomb('pub', 4096)));
    t.same(answers.map((a) => [a.status, a.code, a.servedStatus]), Array.from({ length: 8 }, () => [400, 'nar_mismatch', 404]));
  });

  t.test('declaring the 500 MiB it expands to: invalid_nar, since zeros are no NAR', async (t) => {
    const answer = await copyBomb('pub', FIVE_HUNDRED_MIB);
    t.match(answer, { status: 400, code: 'invalid_nar', servedStatus: 404 });
  });

  t.test('storage limits count the declared NarSize, not the 401 compressed bytes', async (t) => {
    const answer = await copyBomb('small', FIVE_HUNDRED_MIB);
    t.match(answer, { status: 413, code: 'cache_full', servedStatus: 404 });
  });

  t.test('a NarSize over nar.maxUploadSize is refused before anything is decompressed', async (t) => {
    const answer = await copyBomb('pub', 600 * 1024 * 1024);
    t.match(answer, { status: 413, code: 'nar_too_large', servedStatus: 404 });
  });

  t.equal(await stored(), 0, 'nothing was stored');
});
