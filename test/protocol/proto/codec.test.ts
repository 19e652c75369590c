import t from 'tap';
import { Packr } from 'msgpackr';
import {
  decodeMessage, DEFAULT_MAX_MESSAGE_BYTES, encodeMessage, MESSAGE_TYPES, PROTOCOL_VERSION, SERVER_MESSAGES, WORKER_MESSAGES,
} from '../../../protocol/index.js';
import { EXAMPLES } from '../../support/protoExamples.js';

const raw = new Packr({ useRecords: false });
const pack = (value: unknown) => raw.pack(value);
const valid = (type: string) => ({ ...(EXAMPLES.find((m) => m.t === type) as object), v: PROTOCOL_VERSION });

t.test('every message type round-trips, and each has an example', async (t) => {
  t.same([...new Set(EXAMPLES.map((m) => m.t))].sort(), [...MESSAGE_TYPES].sort());
  for (const message of EXAMPLES) {
    const decoded = decodeMessage(encodeMessage(message));
    t.ok(decoded.ok, `${message.t} decodes`);
    if (decoded.ok) t.same(decoded.value, { v: PROTOCOL_VERSION, ...message }, `${message.t} is unchanged`);
  }
});

t.test('directions: every type is sent by workers, servers, or both', async (t) => {
  for (const type of MESSAGE_TYPES) t.notOk(WORKER_MESSAGES.has(type) && SERVER_MESSAGES.has(type), `${type} has one direction at most`);
  t.same(MESSAGE_TYPES.filter((m) => !WORKER_MESSAGES.has(m) && !SERVER_MESSAGES.has(m)).sort(), ['error', 'narAbort', 'reject']);
});

t.test('encodeMessage refuses an invalid message (a bug of the sender)', async (t) => {
  t.throws(() => encodeMessage({ t: 'heartbeatAck', seq: -1 }), /invalid heartbeatAck message: seq/);
  t.throws(() => encodeMessage({ t: 'jobAccepted', jobId: 'has space' }), /jobId/);
});

t.test('a real content address passes the CA check', async (t) => {
  const start = valid('narPushStart') as unknown as { info: object };
  const withCa = { ...start, info: { ...start.info, ca: 'fixed:r:sha256:1b8m03r63zqhnjf7l5wnldhh7c134ap5vpj0850ymkq1iyzicy5s' } };
  t.match(decodeMessage(pack(withCa), { maxBytes: 1 << 20 }), { ok: true });
});

t.test('the malformed corpus: each fails under its own name and code', async (t) => {
  const zeroStats = { runs: 1, cpuSeconds: 0, thunks: 0, functionCalls: 0, primOpCalls: 0, values: 0, lookups: 0, allocatedBytes: 0, peakHeapBytes: 0 };
  const corpus: [string, Uint8Array, string, RegExp, string][] = [
    ['empty frame', new Uint8Array(), 'frame', /empty/, 'malformed_message'],
    ['0xc1, which MessagePack never uses', Uint8Array.from([0xc1]), 'frame', /expected a map/, 'malformed_message'],
    ['a timestamp extension', Uint8Array.from([0xd6, 0xff, 0, 0, 0, 1]), 'frame', /got a Date value/, 'malformed_message'],
    ['truncated map', encodeMessage(EXAMPLES[0]!).subarray(0, 20), 'frame', /not a MessagePack value/, 'malformed_message'],
    ['trailing bytes', Buffer.concat([encodeMessage({ t: 'heartbeatAck', seq: 1 }), Buffer.from([0x01])]), 'frame', /not a MessagePack value/, 'malformed_message'],
    ['an array', pack([1, 'hello']), 'frame', /expected a map .* got an array/, 'malformed_message'],
    ['a string', pack('hello'), 'frame', /got string/, 'malformed_message'],
    ['nil', pack(null), 'frame', /got nil/, 'malformed_message'],
    ['binary', pack(Buffer.from('x')), 'frame', /got binary data/, 'malformed_message'],
    ['nested too deeply', Buffer.alloc(100_000, 0x91), 'frame', /nested too deeply|not a MessagePack/, 'malformed_message'],
    ['an absurd array length', Uint8Array.from([0xdd, 0x7f, 0xff, 0xff, 0xff]), 'frame', /not a MessagePack value/, 'malformed_message'],
    ['version 1 (before evalJob named its project)', pack({ ...valid('heartbeatAck'), v: 1 }), 'v', /version 1 is not supported; this side speaks \/proto version 3/, 'unsupported_version'],
    ['version 2 (before evalCredit)', pack({ ...valid('heartbeatAck'), v: 2 }), 'v', /version 2 is not supported; this side speaks \/proto version 3/, 'unsupported_version'],
    ['version as a string', pack({ ...valid('heartbeatAck'), v: '1' }), 'v', /"v" = string/, 'unsupported_version'],
    ['no version', pack({ t: 'heartbeatAck', seq: 1 }), 'v', /"v" = undefined/, 'unsupported_version'],
    ['unknown type', pack({ v: PROTOCOL_VERSION, t: 'launchMissiles' }), 't', /unknown message type "launchMissiles"/, 'malformed_message'],
    ['type not a string', pack({ v: PROTOCOL_VERSION, t: 7 }), 't', /unknown message type number/, 'malformed_message'],
    ['a missing field', pack({ v: PROTOCOL_VERSION, t: 'heartbeatAck' }), 'heartbeatAck.seq', /expected number/, 'malformed_message'],
    ['an extra field', pack({ ...valid('heartbeatAck'), extra: true }), 'heartbeatAck', /extra/, 'malformed_message'],
    ['a __proto__ key', pack({ ...valid('heartbeatAck'), ['__proto__']: { polluted: true } }), 'heartbeatAck', /__proto_/, 'malformed_message'],
    ['a bad store path', pack({ ...valid('buildJob'), drvPath: '/tmp/evil.drv' }), 'buildJob.drvPath', /not in the store directory/, 'malformed_message'],
    ['a store path with a bad name', pack({ ...valid('buildJob'), drvPath: '/nix/store/lsfjb3hgbdh1w7s3jmdq7a1sk1x41vpg-a b.drv' }), 'buildJob.drvPath', /allowed are/, 'malformed_message'],
    ['not a .drv', pack({ ...valid('buildJob'), drvPath: '/nix/store/lsfjb3hgbdh1w7s3jmdq7a1sk1x41vpg-app' }), 'buildJob.drvPath', /ends in \.drv/, 'malformed_message'],
    ['a short nonce', pack({ ...valid('challenge'), nonce: Buffer.alloc(8) }), 'challenge.nonce', /32 bytes/, 'malformed_message'],
    ['a nonce that is not binary', pack({ ...valid('challenge'), nonce: 'x'.repeat(32) }), 'challenge.nonce', /binary/, 'malformed_message'],
    ['a NAR hash in base16', pack({ ...valid('narPushEnd'), narHash: `sha256:${'a'.repeat(64)}` }), 'narPushEnd.narHash', /nix32/, 'malformed_message'],
    ['an empty NAR chunk', pack({ ...valid('narChunk'), data: Buffer.alloc(0) }), 'narChunk.data', /a chunk holds/, 'malformed_message'],
    ['an unknown reject code', pack({ ...valid('reject'), code: 'teapot' }), 'reject.code', /./, 'malformed_message'],
    ['a class that does not fit the reason', pack({ ...valid('jobFailed'), failure: { class: 'FailedTimeout', reason: 'builder_failed', message: 'x' } }), 'jobFailed.failure.class', /does not match the reason/, 'malformed_message'],
    ['a commit that is not hex', pack({ ...valid('evalJob'), commit: 'HEAD' }), 'evalJob.commit', /40 or 64/, 'malformed_message'],
    // the token becomes an HTTP header line and the pin a curl option: nothing may break out of either
    ['a CA line carrying another narinfo line', pack({ ...valid('narPushStart'), info: { ...(valid('narPushStart') as unknown as { info: object }).info, ca: 'fixed:r:sha256:1b8m03r63zqhnjf7l5wnldhh7c134ap5vpj0850ymkq1iyzicy5s\nSig: evil:AAAA' } }), 'narPushStart.info.ca', /text:<hash>/, 'malformed_message'],
    ['a CA that is not a content address', pack({ ...valid('narPushStart'), info: { ...(valid('narPushStart') as unknown as { info: object }).info, ca: 'whatever' } }), 'narPushStart.info.ca', /text:<hash>/, 'malformed_message'],
    ['a token with a line break', pack({ ...valid('evalJob'), access: { token: 'ghs_x\r\nX-Evil: 1', resolve: null } }), 'evalJob.access.token', /visible ASCII/, 'malformed_message'],
    ['an empty token', pack({ ...valid('evalJob'), access: { token: '', resolve: null } }), 'evalJob.access.token', /visible ASCII/, 'malformed_message'],
    ['a pin that is not host:port:addresses', pack({ ...valid('evalJob'), access: { token: 'ghs_x', resolve: '-x:1:2' } }), 'evalJob.access.resolve', /host:port:addresses/, 'malformed_message'],
    ['a pin with a space', pack({ ...valid('evalJob'), access: { token: 'ghs_x', resolve: 'git.example:443:1.2.3.4 --x' } }), 'evalJob.access.resolve', /host:port:addresses/, 'malformed_message'],
    ['access with an extra field', pack({ ...valid('evalJob'), access: { token: 'ghs_x', resolve: null, user: 'x' } }), 'evalJob.access', /./, 'malformed_message'],
    ['a negative transfer id', pack({ ...valid('narCredit'), transferId: -1 }), 'narCredit.transferId', /./, 'malformed_message'],
    ['NaN seconds', pack({ ...valid('buildJob'), timeoutSecs: Number.NaN }), 'buildJob.timeoutSecs', /./, 'malformed_message'],
    ['an activity of an unknown kind', pack({ ...valid('evalActivity'), kind: 'build' }), 'evalActivity.kind', /./, 'malformed_message'],
    ['an activity message over 4096 characters', pack({ ...valid('evalActivity'), message: 'x'.repeat(4097) }), 'evalActivity.message', /./, 'malformed_message'],
    ['negative CPU time', pack({ ...valid('buildResult'), resources: { cpuUserSeconds: -1, cpuSystemSeconds: 0, peakMemoryBytes: null, ioReadBytes: null, ioWriteBytes: null, oomKills: null } }), 'buildResult.resources.cpuUserSeconds', /./, 'malformed_message'],
    ['a fractional OOM kill count', pack({ ...valid('jobFailed'), resources: { cpuUserSeconds: 0, cpuSystemSeconds: 0, peakMemoryBytes: null, ioReadBytes: null, ioWriteBytes: null, oomKills: 0.5 } }), 'jobFailed.resources.oomKills', /./, 'malformed_message'],
    ['statistics with an extra field', pack({ ...valid('evalResult'), stats: { ...zeroStats, callGraph: [] } }), 'evalResult.stats', /callGraph/, 'malformed_message'],
    ['more than 20 hotspot functions', pack({ ...valid('evalResult'), stats: { ...zeroStats, hotspots: { functions: Array.from({ length: 21 }, () => ({ name: 'f', file: null, line: 1, count: 1 })), primOps: [] } } }),
      'evalResult.stats.hotspots.functions', /./, 'malformed_message'],
    ['a flake graph over 500 nodes', pack({ ...valid('evalResult'), stats: { ...zeroStats, flakeGraph: { root: 'root', edges: [], truncated: false,
      nodes: Array.from({ length: 501 }, (_, i) => ({ id: `n${i}`, type: null, source: null, rev: null, lastModified: null })) } } }), 'evalResult.stats.flakeGraph.nodes', /./, 'malformed_message'],
  ];
  for (const [name, bytes, field, reason, code] of corpus) {
    const decoded = decodeMessage(bytes);
    t.equal(decoded.ok, false, `${name}: refused`);
    if (decoded.ok) continue;
    t.equal(decoded.field, field, `${name}: field`);
    t.match(decoded.reason, reason, `${name}: reason`);
    t.equal(decoded.code, code, `${name}: code`);
  }
  t.equal(({} as Record<string, unknown>)['polluted'], undefined, 'no prototype was polluted');
});

t.test('size caps are checked before decoding', async (t) => {
  const big = encodeMessage({ t: 'narChunk', transferId: 1, seq: 0, data: Buffer.alloc(4 * 1024 * 1024) });
  t.ok(decodeMessage(big).ok, 'a 4 MiB chunk fits the default cap');
  const refused = decodeMessage(big, { maxBytes: 1024 * 1024 });
  t.match(refused, { ok: false, code: 'message_too_large', field: 'frame', reason: /over the cap of 1048576/ });
  t.match(decodeMessage(Buffer.alloc(DEFAULT_MAX_MESSAGE_BYTES + 1)), { ok: false, code: 'message_too_large' });
});

t.test('random mutations of valid frames decode or fail cleanly, never throw', async (t) => {
  let seed = 42;
  const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  let failures = 0;
  for (let i = 0; i < 3000; i++) {
    const frame = Buffer.from(encodeMessage(EXAMPLES[i % EXAMPLES.length]!));
    const mutation = i % 4;
    if (mutation === 0) {
      const at = Math.floor(random() * frame.length);
      frame[at] = frame[at]! ^ (1 << Math.floor(random() * 8));
    }
    else if (mutation === 1) frame[Math.floor(random() * frame.length)] = Math.floor(random() * 256);
    const bytes = mutation === 2 ? frame.subarray(0, Math.floor(random() * frame.length)) : mutation === 3 ? Buffer.concat([frame, frame]) : frame;
    const decoded = decodeMessage(bytes);
    if (!decoded.ok) failures++;
  }
  t.ok(failures > 1000, `most mutations are refused (${failures} of 3000), none threw`);
});
