import t from 'tap';
import { BlobKeyError, assertBlobKey, blobKeyProblem } from '../../../storage/blobs/index.js';

t.test('keys the stores use are valid', async (t) => {
  for (const key of ['nar/0c6kzph7l0dcbyyybi3ralw6wbxs3kbxc5uqpkr7b9z0hixchkvc.nar.zst', 'nar/a', 'a', 'log/x-y_z.1', 'a/b/c/d']) {
    t.equal(blobKeyProblem(key), undefined, key);
  }
});

t.test('each broken rule is named', async (t) => {
  const cases: [string, RegExp][] = [
    ['', /must not be empty/],
    ['/nar/x', /must be relative/],
    ['nar//x', /empty segments/],
    ['nar/', /empty segments/],
    ['nar/../etc', /"\." or "\.\." segments/],
    ['./x', /"\." or "\.\." segments/],
    ['nar/.partial-0123', /must not start with "\."/],
    ['nar/a b', /segments use only A-Z a-z 0-9 \. _ -/],
    ['nar/a\\b', /segments use only/],
    ['nar/a\u0000b', /segments use only/],
    ['x'.repeat(513), /at most 512 characters/],
  ];
  for (const [key, reason] of cases) {
    t.match(blobKeyProblem(key), reason, JSON.stringify(key));
    t.throws(() => assertBlobKey(key), BlobKeyError);
  }
  t.throws(() => assertBlobKey('nar/a b'), { message: 'invalid blob key "nar/a b": segments use only A-Z a-z 0-9 . _ - and must not start with "."' });
});
