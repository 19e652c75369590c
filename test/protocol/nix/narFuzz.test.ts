// Random mutations of valid NARs: each must parse or fail with a NarError, never anything
// else, never hang (the parser looks at each byte once, so a bounded input ends in bounded time).
import t from 'tap';
import { encodeU64, NarError, NarListingBuilder, NarParser, readNar, renderNarListing } from '../../../protocol/nix/index.js';
import { buildFixturePaths, nixStoreDump } from '../../support/nixStore.js';

const MUTATIONS = 3000;
const fixtures = buildFixturePaths();
const seeds = [fixtures.tree, fixtures.file, fixtures.symlink, fixtures.executable, fixtures.refs].map((p) => nixStoreDump(p));
// The tree's 160 kB file would make most mutations land in file contents; a trimmed copy keeps the headers in reach.
const small = seeds.map((nar) => (nar.length > 8192 ? undefined : nar)).filter((n): n is Buffer => !!n);

let state = 0x9e3779b9;
const random = (n: number): number => {
  state ^= state << 13;
  state ^= state >>> 17;
  state ^= state << 5;
  return (state >>> 0) % n;
};

function mutate(input: Buffer): Buffer {
  const out = Buffer.from(input);
  const at = random(out.length);
  switch (random(9)) {
    case 0: // flip one bit
      out[at] = out[at]! ^ (1 << random(8));
      return out;
    case 1: // any byte value
      out[at] = random(256);
      return out;
    case 2: // cut
      return out.subarray(0, at);
    case 3: // delete a range
      return Buffer.concat([out.subarray(0, at), out.subarray(at + 1 + random(64))]);
    case 4: // insert random bytes
      return Buffer.concat([out.subarray(0, at), Buffer.from(Array.from({ length: 1 + random(24) }, () => random(256))), out.subarray(at)]);
    case 5: { // duplicate an 8-aligned range (repeats tokens and entries)
      const from = at & ~7;
      const len = 8 * (1 + random(12));
      return Buffer.concat([out.subarray(0, from + len), out.subarray(from, from + len), out.subarray(from + len)]);
    }
    case 6: { // a length field set to something large or odd
      const from = at & ~7;
      const values = [0, 1, 7, 255, 256, 4096, 2 ** 31, 2 ** 32, 2 ** 40, 2 ** 53 - 1];
      out.set(encodeU64(values[random(values.length)]!), Math.min(from, out.length - 8));
      return out;
    }
    case 7: { // swap two 8-aligned words
      const a = at & ~7;
      const b = random(out.length) & ~7;
      if (a + 8 > out.length || b + 8 > out.length) return out;
      const word = Buffer.from(out.subarray(a, a + 8));
      out.copy(out, a, b, b + 8);
      word.copy(out, b);
      return out;
    }
    default: // append garbage
      return Buffer.concat([out, Buffer.from([random(256)])]);
  }
}

t.test(`${MUTATIONS} mutations: each parses or throws a NarError`, async (t) => {
  const outcomes = { parsed: 0, rejected: 0 };
  const reasons = new Set<string>();
  for (let i = 0; i < MUTATIONS; i++) {
    const base = i % 4 === 0 ? seeds[0]! : small[i % small.length]!;
    let input = mutate(base);
    if (random(3) === 0) input = mutate(input);
    const chunk = 1 + random(i % 2 ? 16 : 4096);
    const builder = new NarListingBuilder();
    const parser = new NarParser(builder);
    try {
      for (let at = 0; at < input.length; at += chunk) parser.push(input.subarray(at, at + chunk));
      parser.end();
      renderNarListing(builder.listing);
      outcomes.parsed++;
    } catch (e) {
      if (!(e instanceof NarError)) {
        t.fail(`mutation ${i} threw ${String(e)} instead of a NarError`, { input: input.toString('base64') });
        continue;
      }
      if (e.offset < 0 || e.offset > input.length) t.fail(`offset ${e.offset} outside the input: ${e.message}`);
      reasons.add(e.reason.replace(/".*"|\d+/g, '…'));
      outcomes.rejected++;
    }
  }
  t.equal(outcomes.parsed + outcomes.rejected, MUTATIONS);
  t.ok(outcomes.rejected > MUTATIONS / 2, 'most mutations are caught');
  t.ok(reasons.size >= 10, `many distinct reasons (${reasons.size})`);
  t.comment(outcomes);
});

type Seen = { type: string; path: string; size?: number; executable?: boolean; target?: string; contents?: string };
type Outcome = { entries: Seen[]; error: { offset: number; reason: string } | null };

/** What the push parser says of `input`, fed whole: the entries with their contents, and the NarError if any. */
function parsedAtOnce(input: Buffer): Outcome {
  const entries: Seen[] = [];
  let open: Buffer[] | null = null;
  const parser = new NarParser({
    directory: (path) => void entries.push({ type: 'directory', path }),
    symlink: (path, _name, target) => void entries.push({ type: 'symlink', path, target }),
    regular: (path, _name, size, executable) => {
      entries.push({ type: 'regular', path, size, executable });
      open = [];
    },
    contents: (chunk) => void open!.push(Buffer.from(chunk)),
    regularEnd: () => {
      entries[entries.length - 1]!.contents = Buffer.concat(open!).toString('hex');
      open = null;
    },
  });
  try {
    parser.push(input);
    parser.end();
    return { entries, error: null };
  } catch (e) {
    if (!(e instanceof NarError)) throw e;
    return { entries, error: { offset: e.offset, reason: e.reason } };
  }
}

/** What readNar yields from `input` in two chunks; each file's contents read when `read`, else skipped. */
async function readLazily(input: Buffer, read: boolean): Promise<Outcome> {
  const entries: Seen[] = [];
  try {
    for await (const entry of readNar([input.subarray(0, 40), input.subarray(40)])) {
      if (entry.type === 'directory') entries.push({ type: 'directory', path: entry.path });
      else if (entry.type === 'symlink') entries.push({ type: 'symlink', path: entry.path, target: entry.target });
      else {
        const seen: Seen = { type: 'regular', path: entry.path, size: entry.size, executable: entry.executable };
        entries.push(seen);
        if (read) {
          const parts: Buffer[] = [];
          for await (const chunk of entry.contents) parts.push(Buffer.from(chunk));
          seen.contents = Buffer.concat(parts).toString('hex');
        }
      }
    }
    return { entries, error: null };
  } catch (e) {
    if (!(e instanceof NarError)) throw e;
    return { entries, error: { offset: e.offset, reason: e.reason } };
  }
}

t.test('the async reader agrees with the push parser on every mutation', async (t) => {
  for (let i = 0; i < 300; i++) {
    const input = mutate(small[i % small.length]!);
    const expected = parsedAtOnce(input);
    const read = i % 2 === 0;
    const got = await readLazily(input, read);
    const label = `mutation ${i} (${input.toString('base64').slice(0, 60)}…)`;
    t.same(got.error, expected.error, `${label}: the same verdict`);
    // The reader stops at the chunk the error is in, so it yields at most what the parser saw.
    const complete = expected.error === null ? expected.entries : expected.entries.slice(0, got.entries.length);
    const comparable = read ? complete : complete.map(({ contents: _, ...rest }) => rest);
    t.same(got.entries, comparable, `${label}: the same entries${read ? ' and contents' : ''}`);
  }
});
