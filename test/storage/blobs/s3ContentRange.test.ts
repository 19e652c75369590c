// Ranged answers from S3-compatible servers are checked against what was asked (see s3ContentRange.ts).
import { Readable } from 'node:stream';
import t from 'tap';
import { BlobRangeError } from '../../../storage/blobs/index.js';
import { fitToRange, parseContentRange } from '../../../storage/blobs/s3ContentRange.js';
import { readAll } from './blobContent.js';

const bodyOf = (...parts: string[]) => Readable.from(parts.map((part) => Buffer.from(part)));

t.test('Content-Range headers', async (t) => {
  t.same(parseContentRange('bytes 0-99/1234'), { size: 1234, range: { start: 0, end: 99 } });
  t.equal(parseContentRange('bytes */1234'), null);
  t.equal(parseContentRange(undefined), null);
});

t.test('an answer that matches is passed through', async (t) => {
  const fitted = fitToRange('k', { start: 2, end: 5 }, 'bytes 2-5/10', bodyOf('cdef'));
  t.same({ size: fitted.size, range: fitted.range }, { size: 10, range: { start: 2, end: 5 } });
  t.equal((await readAll(fitted.body)).toString(), 'cdef');
  const cut = fitToRange('k', { start: 8, end: 100 }, 'bytes 8-9/10', bodyOf('ij'));
  t.same(cut.range, { start: 8, end: 9 }, 'an end past the blob is cut, as S3 does');
});

t.test('more than asked (s3rver reads bytes=0-0 as bytes=0-) is cut to what was asked', async (t) => {
  const body = bodyOf('ab', 'cdef', 'ghij');
  const fitted = fitToRange('k', { start: 0, end: 0 }, 'bytes 0-9/10', body);
  t.same(fitted.range, { start: 0, end: 0 });
  t.equal((await readAll(fitted.body)).toString(), 'a');
  t.ok(body.destroyed, 'the rest is not downloaded');
  const across = fitToRange('k', { start: 0, end: 3 }, 'bytes 0-9/10', bodyOf('ab', 'cdef', 'ghij'));
  t.equal((await readAll(across.body)).toString(), 'abcd');
});

t.test('a range of an empty blob is unsatisfiable, whatever the server says', async (t) => {
  t.throws(() => fitToRange('k', { start: 0, end: 0 }, 'bytes 0-0/0', bodyOf()), BlobRangeError);
});

t.test('other answers are refused with what the server did', async (t) => {
  t.throws(() => fitToRange('k', { start: 2, end: 5 }, undefined, bodyOf('abcdefghij')), /answered a GET of k for bytes=2-5 with Content-Range undefined/);
  t.throws(() => fitToRange('k', { start: 2, end: 5 }, 'bytes 0-9/10', bodyOf('abcdefghij')), /with Content-Range bytes 0-9\/10/);
  t.throws(() => fitToRange('k', { start: 2, end: 5 }, 'bytes 2-3/10', bodyOf('cd')), /sent bytes 2-3 of k, short of 5/);
});
