import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { decompressNar, ZstdFrameTracker } from '../../../protocol/nix/index.js';

const zstd = (input: Buffer, ...flags: string[]): Buffer => execFileSync('zstd', ['-c', '-q', ...flags], { input });
const skippable = (data: Buffer): Buffer => {
  const head = Buffer.alloc(8);
  head.writeUInt32LE(0x184d2a53, 0);
  head.writeUInt32LE(data.length, 4);
  return Buffer.concat([head, data]);
};
const track = (bytes: Uint8Array, chunk: number) => {
  const tracker = new ZstdFrameTracker();
  for (let at = 0; at < bytes.length; at += chunk) {
    const problem = tracker.push(bytes.subarray(at, at + chunk));
    if (problem) return problem;
  }
  return tracker.complete;
};

const text = Buffer.from('kiln '.repeat(50_000));
const random = randomBytes(300_000);
const samples: [string, Buffer][] = [
  ['with checksum and size', zstd(text)],
  ['without checksum', zstd(text, '--no-check')],
  ['incompressible (raw blocks)', zstd(random)],
  ['one byte repeated (RLE blocks)', zstd(Buffer.alloc(500_000, 7), '-19')],
  ['empty content', zstd(Buffer.alloc(0))],
  ['two frames and a skippable frame', Buffer.concat([zstd(text), skippable(Buffer.from('metadata')), zstd(random, '--no-check')])],
];

t.test('whole files end on a frame boundary; every shorter prefix does not', async (t) => {
  for (const [name, file] of samples) {
    for (const chunk of [1, 1000, file.length]) t.equal(track(file, chunk), true, `${name}, chunks of ${chunk}`);
    let prefixes = 0;
    for (let cut = 1; cut < file.length; cut += Math.max(1, Math.floor(file.length / 300))) {
      if (track(file.subarray(0, cut), 4096) === true) t.fail(`${name}: prefix of ${cut} bytes reported complete`);
      prefixes++;
    }
    t.ok(prefixes > 0, `${name}: ${prefixes} prefixes are incomplete`);
  }
});

t.test('data that is not zstd is named', async (t) => {
  t.match(track(Buffer.from('not zstd'), 3), /no zstd frame magic at byte 0/);
  t.match(track(Buffer.concat([zstd(text), Buffer.from('junk')]), 64), /no zstd frame magic at byte \d+/);
  t.equal(new ZstdFrameTracker().complete, false, 'no bytes is no frame');
  const reserved = Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x05, 0x07, 0x00, 0x00]);
  t.match(track(reserved, 9), /reserved block type/);
});

t.test('decompressNar refuses a truncated zstd file that node:zlib would end quietly', async (t) => {
  for (const [name, file] of samples.slice(0, 2)) {
    await t.rejects(
      (async () => {
        for await (const _ of decompressNar([file.subarray(0, file.length - 2)], 'zstd'));
      })(),
      /zstd data is corrupt: truncated, the input ends inside a frame/,
      name,
    );
  }
  const out: Uint8Array[] = [];
  for await (const c of decompressNar([samples[5]![1]], 'zstd')) out.push(c);
  t.ok(Buffer.concat(out).equals(Buffer.concat([text, random])), 'several frames decompress to their concatenation');
});
