// The cache protocol's codec (protocol/cacheProto/): frames round-trip, every bad frame fails under
// its close code without throwing, the server refuses to send an invalid message, and
// docs/cache-protocol.md lists exactly the close codes the code has.
import { readFileSync } from 'node:fs';
import t from 'tap';
import { Packr } from 'msgpackr';
import {
  CACHE_CLOSE_CODES, CACHE_PROTO_VERSION, cacheCloseFrame, decodeCacheClientMessage, decodeCacheServerMessage, encodeCacheClientMessage, encodeCacheMessage,
} from '../../../protocol/index.js';

const packr = new Packr({ useRecords: false });
const HASH = '0'.repeat(32);

t.test('client frames round-trip; server frames decode', async (t) => {
  t.equal(CACHE_PROTO_VERSION, 1);
  const query = { v: 1 as const, t: 'query' as const, id: 4, hashes: [HASH] };
  t.same(decodeCacheClientMessage(encodeCacheClientMessage(query)), { ok: true, value: query });
  const chunk = decodeCacheServerMessage(encodeCacheMessage({ t: 'narChunk', id: 1, data: new Uint8Array([1, 2, 3]) }));
  t.match(chunk, { v: 1, t: 'narChunk', id: 1 });
  t.throws(() => encodeCacheMessage({ t: 'paths', id: 1, found: [{ hash: 'nope', narinfo: '' }], missing: [] }), /refusing to send an invalid paths message/);
});

t.test('bad frames fail under their code, and nothing throws', async (t) => {
  t.match(decodeCacheClientMessage(new Uint8Array(0)), { ok: false, code: 'malformed_message' });
  t.match(decodeCacheClientMessage(new Uint8Array(64 * 1024 + 1)), { ok: false, code: 'message_too_large' });
  t.match(decodeCacheClientMessage(packr.pack({ v: 3, t: 'query' })), { ok: false, code: 'unsupported_version' });
  t.match(decodeCacheClientMessage(packr.pack({ v: 1, t: 'query', id: -1, hashes: [HASH] })), { ok: false, code: 'malformed_message', reason: /^query\.id: / });
  t.match(decodeCacheClientMessage(packr.pack({ v: 1, t: 'nar', id: 1, hash: HASH, __proto__x: 1 })), { ok: false, code: 'malformed_message' });
  t.match(decodeCacheClientMessage(packr.pack({ v: 1, t: 'query', id: 1, hashes: [] })), { ok: false, reason: /^query\.hashes: / });
  // random mutations of valid frames: each decodes or fails cleanly
  const valid = [
    encodeCacheClientMessage({ v: 1, t: 'query', id: 9, hashes: [HASH, HASH] }),
    encodeCacheClientMessage({ v: 1, t: 'nar', id: 9, hash: HASH }),
    encodeCacheClientMessage({ v: 1, t: 'cancel', id: 9 }),
  ];
  let seed = 7;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  let failed = 0;
  for (let i = 0; i < 3000; i++) {
    const frame = Buffer.from(valid[i % valid.length]!);
    for (let n = 1 + Math.floor(random() * 3); n > 0; n--) frame[Math.floor(random() * frame.length)] = Math.floor(random() * 256);
    const cut = random() < 0.2 ? frame.subarray(0, Math.floor(random() * frame.length)) : frame;
    const decoded = decodeCacheClientMessage(cut);
    if (!decoded.ok) failed++;
  }
  t.ok(failed > 0, `${failed} of 3000 mutations refused, none threw`);
});

t.test('close frames: <name>: <reason>, at most 123 bytes; the docs list every code', async (t) => {
  t.same(cacheCloseFrame('not_found', 'no cache "x"'), { closeCode: 4404, closeReason: 'not_found: no cache "x"' });
  t.ok(Buffer.byteLength(cacheCloseFrame('malformed_message', 'é'.repeat(200)).closeReason) <= 123);
  const docs = readFileSync(new URL('../../../docs/cache-protocol.md', import.meta.url), 'utf8');
  const rows = new Map([...docs.matchAll(/^\| ([a-z_]+) \| (\d{4}) \|/gm)].map((m) => [m[1]!, Number(m[2])]));
  t.same(Object.fromEntries(rows), CACHE_CLOSE_CODES);
});
