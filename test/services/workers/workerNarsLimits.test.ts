// NAR pushes over /proto against the storage limits (docs/caches.md, "Storage limits"): a push
// into a cache it would not fit is refused at narPushStart with narAbort too_large, before a
// chunk is sent; with room it is stored and announced (cache.nar.upload).
import pino from 'pino';
import t from 'tap';
import { PROTOCOL_VERSION, type Message, type MessageOf } from '../../../protocol/index.js';
import { systemClock, WorkerNars, type ConnectedWorker } from '../../../services/index.js';
import type { BusEvent } from '../../../storage/index.js';
import { startTestKiln } from '../../support/kiln.js';
import { createTestCache } from '../../support/caches.js';
import { testNarIngest } from '../../support/narIngest.js';
import { makeTestNar } from '../../support/narStorage.js';
import { steppedClock } from '../../support/clock.js';

t.test('a worker push into a full cache', async (t) => {
  const kiln = await startTestKiln(t);
  const cache = await createTestCache(kiln.sql, 'main');
  await kiln.sql`update caches set max_storage_bytes = 50 where id = ${cache.id}`;
  const { ingest } = await testNarIngest(kiln);
  const nars = new WorkerNars({ sql: kiln.sql, ingest, maxUploadSize: 1 << 20, log: pino({ level: 'silent' }), leaseIdleSecs: 300, clock: systemClock });
  const sent: Message[] = [];
  // Only what WorkerNars uses of a connection: its id and the link it answers on.
  const worker = { connectionId: 'test-connection', link: { send: (m: Message) => sent.push(m) } } as unknown as ConnectedWorker;
  const published: BusEvent[] = [];
  t.teardown(kiln.events.bus.subscribe((e) => published.push(e)));

  const nar = await makeTestNar(t, { f: 'pushed by a worker\n'.repeat(20) });
  const start = (transferId: number): MessageOf<'narPushStart'> => ({
    v: PROTOCOL_VERSION, t: 'narPushStart', transferId, jobId: 'build:x:1', targetCaches: ['main'],
    info: { path: nar.info.storePath, narHash: nar.info.narHash, narSize: nar.info.narSize, references: [], deriver: null, ca: null },
  });

  await nars.start(worker, start(1), new Set(['main']));
  t.match(sent.pop(), { t: 'narAbort', transferId: 1, code: 'too_large', reason: /^cache "main" has 50 bytes left under its own limit/ });
  t.same(sent, [], 'no credit: not a chunk is sent');

  await kiln.sql`update caches set max_storage_bytes = null where id = ${cache.id}`;
  await nars.start(worker, start(2), new Set(['main']));
  t.match(sent.shift(), { t: 'narCredit', transferId: 2 });
  nars.chunk(worker, { v: PROTOCOL_VERSION, t: 'narChunk', transferId: 2, seq: 0, data: nar.nar });
  await nars.end(worker, { v: PROTOCOL_VERSION, t: 'narPushEnd', transferId: 2, chunks: 1, narHash: nar.info.narHash, narSize: nar.info.narSize });
  t.match(sent.pop(), { t: 'narPushAck', transferId: 2, status: 'stored' });
  t.same(published.filter((e) => e.event.startsWith('cache.nar.')).map((e) => e.event), ['cache.nar.upload', 'cache.nar.signed']);
});

t.test('a push that goes upload.leaseIdleSecs without data loses its transfer', async (t) => {
  const kiln = await startTestKiln(t);
  await createTestCache(kiln.sql, 'main');
  const { ingest } = await testNarIngest(kiln);
  const clock = steppedClock(new Date('2026-11-26T12:00:00Z'));
  const nars = new WorkerNars({ sql: kiln.sql, ingest, maxUploadSize: 1 << 20, log: pino({ level: 'silent' }), leaseIdleSecs: 300, clock });
  const sent: Message[] = [];
  const worker = { connectionId: 'lease-connection', link: { send: (m: Message) => sent.push(m) } } as unknown as ConnectedWorker;
  const nar = await makeTestNar(t, { f: 'a stalled push\n'.repeat(2000) });
  const half = nar.nar.length >> 1;
  await nars.start(worker, {
    v: PROTOCOL_VERSION, t: 'narPushStart', transferId: 7, jobId: 'build:x:1', targetCaches: ['main'],
    info: { path: nar.info.storePath, narHash: nar.info.narHash, narSize: nar.info.narSize, references: [], deriver: null, ca: null },
  }, new Set(['main']));
  t.match(sent.shift(), { t: 'narCredit', transferId: 7 });

  clock.step(200_000);
  nars.chunk(worker, { v: PROTOCOL_VERSION, t: 'narChunk', transferId: 7, seq: 0, data: nar.nar.subarray(0, half) });
  clock.step(250_000); // 450 s since the start, 250 s since the chunk: data keeps the lease
  t.equal(await nars.expireIdle(), 0, 'a transfer with recent data keeps going');
  clock.step(51_000);
  t.equal(await nars.expireIdle(), 1);
  t.match(sent.find((m) => m.t === 'narAbort'), { t: 'narAbort', transferId: 7, code: 'timeout', reason: /upload\.leaseIdleSecs/ });
  nars.chunk(worker, { v: PROTOCOL_VERSION, t: 'narChunk', transferId: 7, seq: 1, data: nar.nar.subarray(half) });
  t.match(sent.pop(), { t: 'narAbort', transferId: 7, code: 'protocol', reason: 'no open transfer with this id' }, 'the transfer is gone');
  const [row] = await kiln.sql<{ n: number }[]>`select count(*)::int as n from cached_paths`;
  t.equal(row!.n, 0, 'nothing of it was stored');
});
