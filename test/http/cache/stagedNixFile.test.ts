// A NAR file `nix copy` has PUT but whose narinfo has not come yet: served to those who may write
// the cache (Nix asks with HEAD before it uploads), to nobody else, and gone once it is ingested.
import { createHash } from 'node:crypto';
import t from 'tap';
import { renderNarinfo, sha256Nix32 } from '../../../protocol/index.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { startTestKiln } from '../../support/kiln.js';
import { makeTestNar } from '../../support/narStorage.js';

const basic = (password: string) => ({ authorization: `Basic ${Buffer.from(`nix:${password}`).toString('base64')}` });

t.test('a staged nix copy NAR file', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  const bob = await signUp(kiln, 'bob');
  await createTestCache(kiln.sql, 'main', { ownerId: ada.id, public: true });
  const nar = await makeTestNar(t, { f: 'staged by nix copy\n' });
  const file = `${sha256Nix32(createHash('sha256').update(nar.nar).digest()).slice('sha256:'.length)}.nar`;
  const url = `${kiln.url}/cache/main/nar/${file}`;

  t.equal((await fetch(url, { method: 'PUT', headers: basic(ada.token), body: nar.nar })).status, 200);
  const asUploader = await fetch(url, { headers: basic(ada.token) });
  t.equal(asUploader.status, 200);
  t.same(Buffer.from(await asUploader.arrayBuffer()), nar.nar, 'the bytes as staged');
  t.equal((await fetch(url, { headers: basic(bob.token) })).status, 404, 'a reader without writeStore does not see it');
  t.equal((await fetch(url)).status, 404, 'nor does an anonymous one');

  const narinfo = renderNarinfo({ ...nar.info, url: `nar/${file}`, compression: 'none' });
  t.equal((await fetch(`${kiln.url}/cache/main/${nar.hash}.narinfo`, { method: 'PUT', headers: basic(ada.token), body: narinfo })).status, 200);
  t.equal((await fetch(url, { headers: basic(ada.token) })).status, 404, 'ingested: the staged file is gone, the cache serves its own');
});
