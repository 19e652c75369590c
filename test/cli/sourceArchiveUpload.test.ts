// kiln build's upload streams its tarball (cli/sourceArchive.ts, cli/apiClient.ts): the archive is
// a file on disk, not bytes in memory, and the client sends it as it reads it. Against a real kiln:
// the server stores exactly the file's bytes; a tree over http.maxSourceUploadSize is refused
// with a 413 naming the option (the client stops sending); removing the archive leaves nothing.
import t from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { ApiClient, isApiRequestError } from '../../cli/apiClient.js';
import { sourceArchive } from '../../cli/sourceArchive.js';
import { signUp } from '../support/accounts.js';
import { startTestKiln } from '../support/kiln.js';

t.test('the source upload streams from a file', async (t) => {
  const kiln = await startTestKiln(t, { 'http.maxSourceUploadSize': 256 * 1024 });
  const ada = await signUp(kiln, 'ada');
  await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } });
  await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'app', repository: 'file:///nonexistent' } });
  const client = new ApiClient({ server: kiln.url, token: ada.token });
  const work = mkdtempSync(join(tmpdir(), 'kiln-source-archive-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));

  const tree = (name: string, dataBytes: number) => {
    const dir = join(work, name);
    mkdirSync(join(dir, 'sub'), { recursive: true });
    writeFileSync(join(dir, 'flake.nix'), '{ outputs = _: { }; }\n');
    // random bytes do not compress: the archive is about this big
    writeFileSync(join(dir, 'sub', 'data'), randomBytes(dataBytes));
    return dir;
  };

  await t.test('the server stores the archive file byte for byte', async (t) => {
    const archive = await sourceArchive(tree('small', 100 * 1024));
    t.equal(archive.from, 'directory');
    t.equal(archive.files, 2);
    const bytes = readFileSync(archive.file);
    t.equal(archive.size, bytes.length);
    t.match(gunzipSync(bytes).subarray(0, 100).toString('latin1'), /^source\//, 'a gzip tarball below source/');
    const upload = await client.call<{ sha256: string; size: number }>('POST', '/build-requests/source', { file: { path: archive.file, size: archive.size }, query: { project: 'acme/app' } });
    t.same(upload, { ...upload, size: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') });
    await archive.remove();
    t.notOk(existsSync(dirname(archive.file)), 'the archive and its directory are gone');
  });

  await t.test('over http.maxSourceUploadSize: a 413 naming the option', async (t) => {
    const archive = await sourceArchive(tree('big', 4 * 1024 * 1024));
    t.teardown(() => archive.remove());
    t.ok(archive.size > 4 * 1024 * 1024);
    const refused = await client.call('POST', '/build-requests/source', { file: { path: archive.file, size: archive.size }, query: { project: 'acme/app' } }).catch((e: unknown) => e);
    t.ok(isApiRequestError(refused), String(refused));
    t.match(refused, { status: 413, message: /http\.maxSourceUploadSize/ });
    const [count] = await kiln.sql<{ n: number }[]>`select count(*)::int as n from source_uploads`;
    t.equal(count!.n, 1, 'nothing stored of the refused upload');
  });
});
