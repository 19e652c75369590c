import t from 'tap';
import { encodeNarString, encodeNarStrings, encodeU64, NarError, NarListingBuilder, NarParser, readNar, type NarLimits } from '../../../protocol/nix/index.js';

type Token = string | Uint8Array | { raw: Uint8Array };
/** A NAR from tokens: strings are framed, `{ raw }` goes in as it is. */
const nar = (...tokens: Token[]): Uint8Array =>
  Buffer.concat(tokens.map((tok) => (typeof tok === 'object' && 'raw' in tok ? tok.raw : encodeNarString(tok))));
const raw = (bytes: Uint8Array | number[]): { raw: Uint8Array } => ({ raw: Uint8Array.from(bytes) });

const file = (contents: string, executable = false): Token[] => ['(', 'type', 'regular', ...(executable ? ['executable', ''] : []), 'contents', contents, ')'];
const entry = (name: string | Uint8Array, node: Token[]): Token[] => ['entry', '(', 'name', name, 'node', ...node, ')'];
const dir = (...entries: Token[][]): Token[] => ['(', 'type', 'directory', ...entries.flat(), ')'];
const archive = (node: Token[]): Uint8Array => nar('nix-archive-1', ...node);

function parse(bytes: Uint8Array, limits: Partial<NarLimits> = {}, chunk = 5): NarError | undefined {
  const parser = new NarParser(new NarListingBuilder(), limits);
  try {
    for (let at = 0; at < bytes.length; at += chunk) parser.push(bytes.subarray(at, at + chunk));
    parser.end();
    return undefined;
  } catch (e) {
    if (e instanceof NarError) return e;
    throw e;
  }
}

const valid = archive(dir(entry('a', file('hello', true)), entry('b', ['(', 'type', 'symlink', 'target', 'a', ')'])));

t.test('a valid archive parses, whole or a byte at a time', async (t) => {
  t.equal(parse(valid), undefined);
  t.equal(parse(valid, {}, 1), undefined);
});

const cases: [string, Uint8Array, RegExp, number?, Partial<NarLimits>?][] = [
  ['empty input', new Uint8Array(0), /truncated: the stream ended while expecting the magic/, 0],
  ['bad magic', nar('nix-archive-2', ...file('x')), /bad magic: expected the magic "nix-archive-1", got "nix-archive-2"/, 0],
  ['huge first length', nar(raw(encodeU64(2 ** 40))), /bad magic: expected the magic "nix-archive-1", got a string of 1099511627776 bytes/, 0],
  ['not a NAR at all', new TextEncoder().encode('<html><body>404</body></html>\n'), /absurd length|bad magic/, 0],
  ['unknown node type', archive(['(', 'type', 'fifo', ')']), /unknown node type: expected a node type .*got "fifo"/, 56],
  ['unknown tag in a file', archive(['(', 'type', 'regular', 'size', '1', ')']), /unknown tag: expected "executable" or "contents", got "size"/, 72],
  ['unknown tag in a directory', archive(['(', 'type', 'directory', 'entri', ')']), /unknown tag: expected "entry" or "\)" closing the directory, got "entri"/],
  ['missing open paren', nar('nix-archive-1', 'type', 'regular'), /expected "\(" opening a node, got "type"/, 24],
  ['fields out of order', archive(['(', 'type', 'regular', 'contents', 'x', 'executable', '', ')']), /expected "\)" closing the node, got "executable"/],
  ['non-empty executable marker', archive(['(', 'type', 'regular', 'executable', 'yes', 'contents', 'x', ')']), /executable marker must be empty/],
  ['non-zero padding in a tag', nar(raw([...encodeU64(13), ...Buffer.from('nix-archive-1'), 0, 0, 1])), /non-zero padding/, 23],
  ['non-zero padding after contents', nar('nix-archive-1', '(', 'type', 'regular', 'contents', raw([...encodeU64(1), 120, 0, 0, 0, 0, 0, 0, 7]), ')'), /non-zero padding/, 103],
  ['truncated padding', nar('nix-archive-1', '(', 'type', 'regular', 'contents', raw([...encodeU64(1), 120, 0, 0])), /truncated: the stream ended while expecting the padding after file contents/],
  ['truncated contents', nar('nix-archive-1', '(', 'type', 'regular', 'contents', raw([...encodeU64(100), 1, 2, 3])), /truncated: the stream ended while expecting 97 more bytes of file contents/],
  ['truncated inside a length', nar('nix-archive-1', raw([1, 0, 0])), /truncated: the stream ended while expecting "\(" opening a node/],
  ['truncated before the contents length', nar('nix-archive-1', '(', 'type', 'regular', 'contents'), /expecting the length of the file contents/],
  ['truncated directory', nar('nix-archive-1', '(', 'type', 'directory', ...entry('a', file('x'))), /expecting "entry" or "\)" closing the directory/],
  ['trailing garbage', Buffer.concat([valid, Buffer.from([0])]), /trailing garbage after the end of the archive/, valid.length],
  ['a second archive appended', Buffer.concat([valid, valid]), /trailing garbage/, valid.length],
  ['unsorted entries', archive(dir(entry('b', file('')), entry('a', file('')))), /entries not sorted: "a" comes after "b" in directory ""/],
  ['duplicate entries', archive(dir(entry('a', dir(entry('x', file('')), entry('x', file('')))))), /duplicate entry "x" in directory "a"/],
  ['bytewise order, not numeric', archive(dir(entry('9', file('')), entry('10', file('')))), /entries not sorted: "10" comes after "9"/],
  ['empty name', archive(dir(entry('', file('')))), /invalid file name: an empty entry name/],
  ['dot name', archive(dir(entry('.', file('')))), /invalid file name: the entry name "\."/],
  ['dot-dot name', archive(dir(entry('..', file('')))), /invalid file name: the entry name "\.\."/],
  ['slash in a name', archive(dir(entry('a/b', file('')))), /invalid file name: an entry name containing "\/": "a\/b"/],
  ['NUL in a name', archive(dir(entry('a\0b', file('')))), /invalid file name: an entry name containing a NUL byte/],
  ['name too long', archive(dir(entry('n'.repeat(256), file('')))), /expected an entry name, got a string of 256 bytes \(limit 255\)/],
  ['empty symlink target', archive(['(', 'type', 'symlink', 'target', '', ')']), /empty symlink target/],
  ['NUL in a symlink target', archive(['(', 'type', 'symlink', 'target', 'a\0', ')']), /symlink target contains a NUL byte/],
  ['symlink target too long', archive(['(', 'type', 'symlink', 'target', 't'.repeat(4096), ')']), /a symlink target, got a string of 4096 bytes \(limit 4095\)/],
  ['absurd tag length', nar('nix-archive-1', raw(encodeU64(2 ** 52))), /expected "\(" opening a node, got a string of 4503599627370496 bytes/, 24],
  ['length beyond 2^53', nar('nix-archive-1', raw([0, 0, 0, 0, 0, 0, 0, 0x80])), /absurd length/, 24],
  ['file larger than the NAR limit', nar('nix-archive-1', '(', 'type', 'regular', 'contents', raw(encodeU64(2 ** 40))), /absurd length: a file of 1099511627776 bytes does not fit the NAR size limit of 1000000/, 88, { maxNarSize: 1_000_000 }],
  ['NAR larger than its limit', valid, /the NAR is larger than the limit of 64 bytes/, 64, { maxNarSize: 64 }],
  ['nested too deep', archive(dir(entry('a', dir(entry('b', dir()))))), /directories nested deeper than the limit of 2/, undefined, { maxDepth: 2 }],
];

t.test('malformed NARs are refused with a NarError that names the problem and the byte', async (t) => {
  for (const [name, bytes, reason, offset, limits] of cases) {
    for (const chunk of [1, 7, 1 << 20]) {
      const error = parse(bytes, limits, chunk);
      t.ok(error instanceof NarError, `${name} (chunks of ${chunk})`);
      t.match(error?.message, reason, name);
      if (offset !== undefined) t.equal(error?.offset, offset, `${name}: offset`);
    }
  }
});

t.test('the parser stays failed: later pushes and end() repeat the first error', async (t) => {
  const parser = new NarParser();
  t.throws(() => parser.push(nar('nix-archive-2')), /bad magic/);
  t.throws(() => parser.push(valid), /bad magic/);
  t.throws(() => parser.end(), /bad magic/);
});

t.test('readNar rejects the same way', async (t) => {
  for (const [name, bytes, reason, , limits] of cases) {
    await t.rejects(
      (async () => {
        for await (const e of readNar([bytes], limits)) if (e.type === 'regular') for await (const _ of e.contents);
      })(),
      reason,
      name,
    );
  }
});

t.test('an absurd length allocates nothing: a 1 PB file claim is streamed, not buffered', async (t) => {
  const claim = nar('nix-archive-1', '(', 'type', 'regular', 'contents', raw(encodeU64(2 ** 50)));
  const before = process.memoryUsage().arrayBuffers;
  let seen = 0;
  const parser = new NarParser({ contents: (c) => void (seen += c.length) });
  parser.push(claim);
  const block = new Uint8Array(1 << 20);
  for (let i = 0; i < 64; i++) parser.push(block);
  t.equal(seen, 64 << 20, 'contents pass straight through');
  t.ok(process.memoryUsage().arrayBuffers - before < 16 << 20, 'no buffer grew with the claimed length');
  t.throws(() => parser.end(), /truncated: the stream ended while expecting \d+ more bytes of file contents/);
});

t.test('encodeNarStrings frames several tokens', async (t) => {
  t.same(Buffer.from(encodeNarStrings('(', ')')), Buffer.concat([encodeNarString('('), encodeNarString(')')]));
  t.equal(encodeNarString('').length, 8);
  t.equal(encodeNarString('12345678').length, 16);
});
