// POST /build-requests/source and the capability URL a worker fetches: a gzip tarball stored and
// served back byte for byte without credentials; a wrong token, an expired upload, a body that
// is no tarball, an empty body and one over http.maxSourceUploadSize are refused clearly.
import t from 'tap';
import { gzipSync } from 'node:zlib';
import { createHash, randomBytes } from 'node:crypto';
import { signUp } from '../../../support/accounts.js';
import { startTestKiln, type TestKiln } from '../../../support/kiln.js';

interface Upload { id: string; project: string; size: number; sha256: string; format: string; url: string; expires_at: string }

/** A one-file ustar archive, enough for the format check. */
function tarball(name: string, contents: Buffer): Buffer {
  const header = Buffer.alloc(512);
  header.write(name, 0);
  header.write('0000644\0', 100);
  header.write(contents.length.toString(8).padStart(11, '0') + '\0', 124);
  header.write('ustar\0' + '00', 257);
  const padded = Buffer.alloc(Math.ceil(contents.length / 512) * 512);
  contents.copy(padded);
  return Buffer.concat([header, padded, Buffer.alloc(1024)]);
}

async function upload(kiln: TestKiln, token: string | null, query: string, body: Buffer | ReadableStream<Uint8Array>) {
  const res = await fetch(`${kiln.url}/api/v1/build-requests/source${query}`, {
    method: 'POST', body, headers: { 'content-type': 'application/gzip', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    ...(body instanceof ReadableStream ? { duplex: 'half' } : {}),
  } as RequestInit);
  const json = (await res.json().catch(() => ({ message: 'not JSON' }))) as { message: unknown };
  return { status: res.status, message: json.message };
}

t.test('source uploads', async (t) => {
  const kiln = await startTestKiln(t, { 'http.maxSourceUploadSize': 64 * 1024 });
  const ada = await signUp(kiln, 'ada');
  const bob = await signUp(kiln, 'bob');
  t.equal((await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } })).status, 200);
  t.equal((await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'app', repository: 'file:///nonexistent' } })).status, 200);

  const source = gzipSync(tarball('flake.nix', Buffer.from('{ outputs = _: { }; }\n')));
  const made = await upload(kiln, ada.token, '?project=acme/app', source);
  t.equal(made.status, 200, JSON.stringify(made.message));
  const info = made.message as Upload;
  t.match(info, { project: 'acme/app', size: source.length, format: 'gzip', sha256: createHash('sha256').update(source).digest('hex') });
  t.match(info.url, new RegExp(`^${kiln.url.replace(/[.]/g, '\\.')}/build-sources/${info.id}\\?token=[A-Za-z0-9_-]{43}$`));

  const fetched = await fetch(info.url);
  t.equal(fetched.status, 200);
  t.equal(fetched.headers.get('content-type'), 'application/gzip');
  t.equal(fetched.headers.get('x-content-type-options'), 'nosniff', 'a tenant\'s bytes are never sniffed into HTML');
  t.same(Buffer.from(await fetched.arrayBuffer()), source, 'a worker gets the bytes back without credentials');
  t.equal((await fetch(info.url.replace(/token=.*/, 'token=wrong'))).status, 404, 'a wrong token');
  t.equal((await fetch(info.url.replace(/\?token=.*/, ''))).status, 404, 'no token');
  t.equal((await fetch(`${kiln.url}/build-sources/not-a-uuid?token=x`)).status, 400, 'a malformed id');

  const plainTar = await upload(kiln, ada.token, '?project=acme/app', tarball('a', Buffer.from('x')));
  t.match(plainTar, { status: 200, message: { format: 'tar' } });

  const cases: [string, string | null, string, Buffer, number, RegExp][] = [
    ['no project', ada.token, '', source, 400, /project/],
    ['unknown project', ada.token, '?project=acme/nope', source, 404, /project/],
    ['a stranger', bob.token, '?project=acme/app', source, 404, /project/],
    ['no token', null, '?project=acme/app', source, 401, /./],
    ['not a tarball', ada.token, '?project=acme/app', randomBytes(2000), 415, /not a tarball/],
    ['tiny non-tarball', ada.token, '?project=acme/app', Buffer.from('hi'), 415, /not a tarball/],
    ['empty', ada.token, '?project=acme/app', Buffer.alloc(0), 400, /empty/],
    ['too large (Content-Length)', ada.token, '?project=acme/app', Buffer.alloc(64 * 1024 + 1), 413, /http\.maxSourceUploadSize/],
  ];
  for (const [label, token, query, body, status, message] of cases) {
    const res = await upload(kiln, token, query, body);
    t.equal(res.status, status, `${label}: ${JSON.stringify(res.message)}`);
    t.match(String(res.message), message, label);
  }
  // Without Content-Length the limit is found while streaming: the same answer.
  const streamed = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(source);
      for (let i = 0; i < 20; i++) controller.enqueue(new Uint8Array(8192));
      controller.close();
    },
  });
  const chunked = await upload(kiln, ada.token, '?project=acme/app', streamed);
  t.equal(chunked.status, 413);
  t.match(String(chunked.message), /http\.maxSourceUploadSize \(65536 bytes\)/);
  const [counted] = await kiln.sql<{ count: number }[]>`select count(*)::int as count from source_uploads`;
  t.equal(counted!.count, 2, 'refused uploads leave no row');

  // An expired upload is gone for the worker, and the next upload sweeps its row and blob.
  await kiln.sql`update source_uploads set expires_at = now() - interval '1 second' where id = ${info.id}`;
  t.equal((await fetch(info.url)).status, 404, 'expired');
  t.equal((await upload(kiln, ada.token, '?project=acme/app', source)).status, 200);
  t.same(await kiln.sql`select id from source_uploads where id = ${info.id}`, [], 'swept');
  t.equal((await kiln.api('GET', '/health')).status, 200);
});
