import { createHash } from 'node:crypto';
import t from 'tap';
import { NarParser, readNar, type NarEntry } from '../../../protocol/nix/index.js';
import { buildFixturePaths, nixStoreDump } from '../../support/nixStore.js';

const fixtures = buildFixturePaths();
const treeNar = nixStoreDump(fixtures.tree);

async function* chunked(bytes: Uint8Array, sizes: () => number): AsyncGenerator<Uint8Array> {
  for (let at = 0; at < bytes.length; ) {
    const n = Math.max(1, sizes());
    yield bytes.subarray(at, at + n);
    at += n;
  }
}

/** Entries with contents replaced by their sha256, so runs can be compared. */
async function summarise(source: AsyncIterable<Uint8Array>): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const entry of readNar(source)) {
    if (entry.type !== 'regular') {
      out.push(entry);
      continue;
    }
    const hash = createHash('sha256');
    let bytes = 0;
    for await (const chunk of entry.contents) {
      hash.update(chunk);
      bytes += chunk.length;
    }
    const { contents: _contents, ...rest } = entry;
    out.push({ ...rest, bytes, sha256: hash.digest('hex') });
  }
  return out;
}

t.test('reads the tree fixture into entries in NAR order', async (t) => {
  const entries = await summarise(chunked(treeNar, () => 65536));
  const paths = entries.map((e) => (e as NarEntry).path);
  t.equal(paths[0], '', 'the root comes first');
  t.ok(paths.includes('share/doc/deep/er/f'));
  t.ok(paths.includes('share/\u00fcn\u00efc\u00f8d\u00e9 \u2713.txt'), 'unicode names decode');
  t.same(paths.filter((p) => p.startsWith('numbers/')), ['1', '10', '100', '2', '9'].map((n) => `numbers/${n}`), 'byte order, not numeric');
  const hello = entries.find((e) => (e as NarEntry).path === 'bin/hello') as { executable: boolean; size: number; narOffset: number };
  t.equal(hello.executable, true);
  t.equal(treeNar.subarray(hello.narOffset, hello.narOffset + hello.size).toString(), '#!/bin/sh\necho hi\n', 'narOffset points at the contents');
  t.match(entries.find((e) => (e as NarEntry).path === 'share/link'), { type: 'symlink', target: '../bin/hello' });
  t.match(entries.find((e) => (e as NarEntry).path === 'empty-file'), { type: 'regular', size: 0, bytes: 0, executable: false });
  t.match(entries.find((e) => (e as NarEntry).path === 'share/big.txt'), { bytes: 168894 });
});

t.test('any chunk boundaries give the same entries', async (t) => {
  const whole = await summarise(chunked(treeNar, () => treeNar.length));
  t.same(await summarise(chunked(treeNar, () => 1)), whole, 'one byte at a time');
  for (let seed = 1; seed <= 20; seed++) {
    let state = seed;
    const random = () => {
      state = (state * 1103515245 + 12345) % 2 ** 31;
      return state % 97;
    };
    t.same(await summarise(chunked(treeNar, random)), whole, `random chunks, seed ${seed}`);
  }
});

t.test('every fixture kind of root parses', async (t) => {
  t.match(await summarise(chunked(nixStoreDump(fixtures.file), () => 3)), [{ type: 'regular', path: '', size: 6, executable: false }]);
  t.match(await summarise(chunked(nixStoreDump(fixtures.executable), () => 3)), [{ type: 'regular', path: '', executable: true }]);
  t.match(await summarise(chunked(nixStoreDump(fixtures.empty), () => 3)), [{ type: 'regular', path: '', size: 0 }]);
  t.same(await summarise(chunked(nixStoreDump(fixtures.symlink), () => 3)), [{ type: 'symlink', path: '', target: '../somewhere/else' }]);
});

t.test('file contents are streamed once, and skipped when not read', async (t) => {
  let count = 0;
  for await (const entry of readNar(chunked(treeNar, () => 1000))) {
    count++;
    if (entry.type === 'regular' && entry.path === 'share/big.txt') {
      const iterator = entry.contents[Symbol.asyncIterator]();
      const first = await iterator.next();
      t.equal(first.done, false, 'a first chunk arrives');
      t.ok((first.value as Uint8Array).length <= 1000, 'chunks are views, never larger than what came in');
      await t.rejects(async () => {
        for await (const _ of entry.contents) break;
      }, /can only be read once/);
    }
  }
  t.ok(count > 20, 'partly read and unread files are skipped, the walk goes on');

  let held: NarEntry | undefined;
  for await (const entry of readNar(chunked(treeNar, () => 1000))) if (entry.type === 'regular' && !held) held = entry;
  if (held?.type !== 'regular') throw new Error('no regular file');
  const late = held;
  await t.rejects(async () => {
    for await (const _ of late.contents) break;
  }, /before the next entry/);
});

t.test('stopping early closes the source', async (t) => {
  let closed = false;
  const source = (async function* () {
    try {
      yield* chunked(treeNar, () => 100);
    } finally {
      closed = true;
    }
  })();
  for await (const entry of readNar(source)) if (entry.path === 'bin') break;
  t.ok(closed);
});

t.test('a source error passes through unchanged', async (t) => {
  const boom = new Error('disk on fire');
  const source = (async function* () {
    yield treeNar.subarray(0, 100);
    throw boom;
  })();
  await t.rejects(summarise(source), boom);
});

t.test('the push parser reports its position and completion', async (t) => {
  const parser = new NarParser();
  t.equal(parser.done, false);
  parser.push(treeNar);
  parser.end();
  t.equal(parser.done, true);
  t.equal(parser.position, treeNar.length);
});
