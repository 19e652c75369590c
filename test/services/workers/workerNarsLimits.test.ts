// NAR pushes over /proto against the storage limits (docs/caches.md, "Storage limits"): a push
// into a cache it would not fit is refused at narPushStart with narAbort too_large, before a
// chunk is sent; with room it is stored and announced (cache.nar.upload).
import pino from 'pino';
import t from 'tap';
import { PROTOCOL_VERSION, type Message, type MessageOf } from '../../../protocol/index.js';
import { WorkerNars, type ConnectedWorker } from '../../../services/index.js';
import type { BusEvent } from '../../../storage/index.js';
import { startTestKiln } from '../../support/kiln.js';
import { createTestCache } from '../../support/caches.js';
import { testNarIngest } from '../../support/narIngest.js';
import { makeTestNar } from '../../support/narStorage.js';

t.test('a worker push into a full cache', async (t) => {
  const kiln = await startTestKiln(t);
  const cache = await createTestCache(kiln.sql, 'main');
  await kiln.sql`update caches set max_storage_bytes = 50 where id = ${cache.id}`;
  const { ingest } = await testNarIngest(kiln);
  const nars = new WorkerNars({ sql: kiln.sql, ingest, maxUploadSize: 1 << 20, log: pino({ level: 'silent' }) });
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
