import t from 'tap';
import { readNar, writeNar, type NarTreeNode } from '../../../protocol/nix/index.js';

type RegularNode = Extract<NarTreeNode, { type: 'regular' }>;

const file = (text: string, executable = false): RegularNode => {
  const bytes = Buffer.from(text);
  return {
    type: 'regular', executable, size: bytes.length,
    async *contents(chunkBytes) {
      for (let at = 0; at < bytes.length; at += chunkBytes) yield bytes.subarray(at, at + chunkBytes);
    },
  };
};
const directory = (children: Record<string, NarTreeNode>): NarTreeNode => ({
  type: 'directory',
  names: async () => Object.keys(children).map((name) => Buffer.from(name)),
  child: async (name) => children[Buffer.from(name).toString()]!,
});
const symlink = (target: string): NarTreeNode => ({ type: 'symlink', target: Buffer.from(target) });

const collect = async (source: AsyncIterable<Uint8Array>): Promise<Buffer> => {
  const parts: Uint8Array[] = [];
  for await (const chunk of source) parts.push(Buffer.from(chunk));
  return Buffer.concat(parts);
};

/** What a NAR holds, read back by the NAR reader: each entry with its contents as text. */
async function entriesOf(nar: Buffer): Promise<unknown[]> {
  const out: unknown[] = [];
  async function* source() {
    yield nar;
  }
  for await (const entry of readNar(source())) {
    if (entry.type !== 'regular') out.push(entry);
    else out.push({ path: entry.path, executable: entry.executable, text: (await collect(entry.contents)).toString() });
  }
  return out;
}

const tree = directory({
  zeta: file('last by name'),
  bin: directory({ run: file('#!/bin/sh\n', true) }),
  '10': file('1'.repeat(1000)),
  '9': symlink('../bin/run'),
  empty: directory({}),
});

t.test('a tree in memory becomes a NAR the reader reads back, entries sorted by name bytes', async (t) => {
  t.same(await entriesOf(await collect(writeNar(tree))), [
    { type: 'directory', path: '' },
    { path: '10', executable: false, text: '1'.repeat(1000) },
    { type: 'symlink', path: '9', target: '../bin/run' },
    { type: 'directory', path: 'bin' },
    { path: 'bin/run', executable: true, text: '#!/bin/sh\n' },
    { type: 'directory', path: 'empty' },
    { path: 'zeta', executable: false, text: 'last by name' },
  ]);
});

t.test('the chunk size changes how the bytes are cut, never the bytes', async (t) => {
  const whole = await collect(writeNar(tree));
  for (const chunkBytes of [1, 7, 100]) {
    const chunks: Uint8Array[] = [];
    for await (const chunk of writeNar(tree, { chunkBytes })) chunks.push(Buffer.from(chunk));
    t.ok(Buffer.concat(chunks).equals(whole), `chunkBytes ${chunkBytes}`);
    t.ok(chunks.length > 1, 'more than one chunk');
  }
});

t.test('contents that are not the size the node claims are refused, not written', async (t) => {
  const lying = (size: number, text: string): RegularNode => ({ ...file(text), size });
  await t.rejects(collect(writeNar(lying(5, 'four'))), /a file of 5 bytes gave only 4 bytes/);
  await t.rejects(collect(writeNar(lying(3, 'four'))), /a file of 3 bytes gave more bytes than that/);
});
