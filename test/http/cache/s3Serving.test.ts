// The binary cache on S3 blobs (s3rver): small NARs served by kiln from memory, larger ones by a
// redirect to a presigned URL, which real Nix follows.
import t from 'tap';
import { startTestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { buildFixturePaths } from '../../support/nixStore.js';
import { localNar, uploadChunked } from '../../support/narUploads.js';
import { freshStore, nixOk, runNix } from '../../support/nixClient.js';
import { startTestS3 } from '../../support/s3.js';

t.test('S3 blobs', async (t) => {
  const s3 = await startTestS3(t);
  const o = s3.options();
  const kiln = await startTestKiln(t, {
    's3.enable': true, 's3.bucket': o.bucket, 's3.endpoint': o.endpoint, 's3.region': o.region,
    's3.accessKeyId': o.accessKeyId, 's3.secretAccessKeyFile': o.secretAccessKeyFile, 's3.maxRetries': 1,
    'nar.smallBytes': 1024,
  });
  const ada = await signUp(kiln, 'ada');
  const cache = await createTestCache(kiln.sql, 'main', { public: true, ownerId: ada.id });
  const fixtures = buildFixturePaths();
  const uploaded: Record<string, { file_hash: string; file_size: number }> = {};
  for (const path of [fixtures.file, fixtures.refs, fixtures.tree]) {
    const nar = localNar(path);
    const res = await uploadChunked(kiln, ada.token, 'main', nar, 8192);
    t.equal(res.status, 200, res.status === 200 ? `uploaded ${path}` : JSON.stringify(res.body));
    uploaded[path] = res.body.message as { file_hash: string; file_size: number };
  }

  t.test('a NAR file above nar.smallBytes is a redirect to a presigned URL', async (t) => {
    const { file_hash, file_size } = uploaded[fixtures.tree]!;
    t.ok(file_size > 1024);
    const res = await fetch(`${kiln.url}/cache/main/nar/${file_hash}.nar.zst`, { redirect: 'manual' });
    t.equal(res.status, 302);
    const location = res.headers.get('location')!;
    t.match(location, new RegExp(`^${s3.endpoint}/`));
    const direct = await fetch(location);
    t.equal(direct.status, 200);
    t.equal((await direct.arrayBuffer()).byteLength, file_size);
  });

  t.test('a small one comes from kiln itself', async (t) => {
    const { file_hash, file_size } = uploaded[fixtures.file]!;
    const res = await fetch(`${kiln.url}/cache/main/nar/${file_hash}.nar.zst`, { redirect: 'manual' });
    t.equal(res.status, 200);
    t.equal((await res.arrayBuffer()).byteLength, file_size);
  });

  t.test('Nix follows the redirects', async (t) => {
    const store = freshStore();
    await nixOk('nix', ['copy', '--from', `${kiln.url}/cache/main`, '--to', store, '--option', 'trusted-public-keys', cache.publicKey, fixtures.refs, fixtures.tree]);
    const verified = await runNix('nix', ['store', 'verify', '--store', store, '--option', 'trusted-public-keys', cache.publicKey, fixtures.refs, fixtures.tree]);
    t.equal(verified.status, 0, verified.stderr);
  });
});
