// Read tokens of private caches for build jobs (services/caches/cacheReadTokens.ts): real Nix substitutes
// from a private cache with the token in a netrc file, the way a worker does; a token opens only
// the caches it names, only until it expires, only for reading, and cannot be altered.
import t from 'tap';
import { startTestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { buildFixturePaths } from '../../support/nixStore.js';
import { localNar, uploadChunked } from '../../support/narUploads.js';
import { freshStore, netrcFile, nixOk, runNix } from '../../support/nixClient.js';
import { openSecretBox } from '../../../storage/index.js';
import { cacheReadTokenOpens, mintCacheReadToken } from '../../../services/index.js';
import { netrcFor } from '../../../worker/substituterNetrc.js';

t.test('a read token substitutes from a private cache with real Nix', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  const fixtures = buildFixturePaths();
  const secret = await createTestCache(kiln.sql, 'secret', { ownerId: ada.id });
  const other = await createTestCache(kiln.sql, 'other', { ownerId: ada.id });
  for (const path of [fixtures.file, fixtures.refs]) t.equal((await uploadChunked(kiln, ada.token, 'secret', localNar(path))).status, 200);
  const box = await openSecretBox(kiln.sql, { baseDir: kiln.baseDir, 'secrets.cryptFile': null });
  const trust = ['--option', 'trusted-public-keys', secret.publicKey];
  const copy = (token: string) => runNix('nix', ['copy', '--from', `${kiln.url}/cache/secret`, '--to', freshStore(), ...trust, fixtures.refs], { netrc: netrcFile(token) });

  const token = mintCacheReadToken(box, [other.id, secret.id], 600);
  t.ok(cacheReadTokenOpens(box, token, secret.id));
  const store = freshStore();
  await nixOk('nix', ['copy', '--from', `${kiln.url}/cache/secret`, '--to', store, ...trust, fixtures.refs], { netrc: netrcFile(token) });
  const verified = await runNix('nix', ['store', 'verify', '--store', store, ...trust, fixtures.refs, fixtures.file]);
  t.equal(verified.status, 0, verified.stderr);

  t.not((await copy(mintCacheReadToken(box, [other.id], 600))).status, 0, 'a token for another cache opens nothing here');
  t.not((await copy(mintCacheReadToken(box, [secret.id], -5))).status, 0, 'an expired token is refused');
  const tampered = token.slice(0, -4) + (token.endsWith('AAAA') ? 'BBBB' : 'AAAA');
  t.not((await copy(tampered)).status, 0, 'an altered token is refused');
  t.notOk(cacheReadTokenOpens(box, 'KCRnot-base64-at-all!', secret.id), 'garbage is not a token');

  const auth = { authorization: `Basic ${Buffer.from(`kiln:${token}`).toString('base64')}` };
  const narinfo = `${fixtures.file.slice(11, 43)}.narinfo`;
  t.equal((await fetch(`${kiln.url}/cache/secret/${narinfo}`, { headers: auth })).status, 200, 'reads');
  t.equal((await fetch(`${kiln.url}/cache/secret/${narinfo}`)).status, 401, 'the cache stays private');
  const write = await fetch(`${kiln.url}/cache/secret/${narinfo}`, { method: 'PUT', headers: auth, body: 'StorePath: x\n' });
  t.ok(write.status >= 400 && write.status < 500, `a read token does not write (${write.status})`);
});

t.test('the worker writes one netrc entry per host', async (t) => {
  const text = netrcFor([
    { url: 'http://cache.example:3000/cache/a', publicKeys: [], password: 'KCRone' },
    { url: 'http://cache.example:3000/cache/b', publicKeys: [], password: 'KCRone' },
    { url: 'https://cache.nixos.org', publicKeys: [] },
  ]);
  t.equal(text, 'machine cache.example login kiln password KCRone\n');
  t.equal(netrcFor([{ url: 'https://cache.nixos.org', publicKeys: [] }]), '');
});
