import t from 'tap';
import { multipartBoundary, readMultipart } from '../../http/multipart.js';

const once = async function* (bytes: Buffer) {
  yield bytes;
};

const body = (boundary: string, parts: { name: string; filename?: string; type?: string; data: string | Buffer }[], preamble = '') =>
  Buffer.concat([
    Buffer.from(preamble),
    ...parts.flatMap((p) => [
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"${p.filename ? `; filename="${p.filename}"` : ''}\r\n${p.type ? `Content-Type: ${p.type}\r\n` : ''}\r\n`),
      Buffer.from(p.data),
      Buffer.from('\r\n'),
    ]),
    Buffer.from(`--${boundary}--\r\n`),
  ]);

async function collect(source: Buffer, boundary: string, chunkSize: number) {
  const chunks = async function* () {
    for (let i = 0; i < source.length; i += chunkSize) yield source.subarray(i, i + chunkSize);
  };
  const parts: { name: string; filename: string | null; contentType: string | null; data: string }[] = [];
  for await (const part of readMultipart(chunks(), boundary)) {
    const pieces: Uint8Array[] = [];
    for await (const piece of part.body) pieces.push(piece);
    parts.push({ name: part.name, filename: part.filename, contentType: part.contentType, data: Buffer.concat(pieces).toString('latin1') });
  }
  return parts;
}

t.test('reads parts whatever the chunking, even when the data looks almost like a boundary', async (t) => {
  const boundary = 'XyZ123';
  const tricky = Buffer.from('\r\n--XyZ12 not quite\r\n--XyZ1\r\n\r\n--', 'latin1');
  const source = body(boundary, [
    { name: 'narinfo', type: 'application/json', data: '{"a":1}' },
    { name: 'nar', filename: 'x.nar', type: 'application/octet-stream', data: tricky },
  ], 'preamble to ignore\r\n');
  for (const size of [1, 2, 3, 7, 13, 64, 100000]) {
    const parts = await collect(source, boundary, size);
    t.same(parts, [
      { name: 'narinfo', filename: null, contentType: 'application/json', data: '{"a":1}' },
      { name: 'nar', filename: 'x.nar', contentType: 'application/octet-stream', data: tricky.toString('latin1') },
    ], `chunks of ${size}`);
  }
});

t.test('a part the caller does not read is skipped', async (t) => {
  const source = body('b', [{ name: 'first', data: 'skip me' }, { name: 'second', data: 'read me' }]);
  const names: string[] = [];
  let second = '';
  for await (const part of readMultipart(once(source), 'b')) {
    names.push(part.name);
    if (part.name === 'second') for await (const c of part.body) second += Buffer.from(c).toString();
  }
  t.same(names, ['first', 'second']);
  t.equal(second, 'read me');
});

t.test('malformed bodies are 400 invalid_multipart naming the problem', async (t) => {
  const read = async (source: Buffer, boundary = 'b') => {
    for await (const part of readMultipart(once(source), boundary)) for await (const _ of part.body) void _;
  };
  await t.rejects(read(Buffer.from('no boundary here')), { status: 400, code: 'invalid_multipart', message: /never occurs/ });
  await t.rejects(read(Buffer.from('--b\r\nContent-Disposition: form-data; name="nar"\r\n\r\ncut off')), { message: /ends inside the part "nar"/ });
  await t.rejects(read(Buffer.from('--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--')), { message: /no Content-Disposition/ });
  await t.rejects(read(Buffer.from('--b\r\nContent-Disposition: form-data; name="x"\r\n')), { message: /inside a part's headers/ });
});

t.test('the boundary comes from the Content-Type', async (t) => {
  t.equal(multipartBoundary('multipart/form-data; boundary=abc'), 'abc');
  t.equal(multipartBoundary('multipart/form-data; charset=utf-8; boundary="a b"'), 'a b');
  t.throws(() => multipartBoundary('application/json'), { code: 'invalid_multipart', message: /expected Content-Type multipart\/form-data/ });
  t.throws(() => multipartBoundary('multipart/form-data'), { message: /no boundary/ });
});
