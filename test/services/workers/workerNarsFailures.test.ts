// How a /proto NAR push fails (docs/proto.md, "NAR push"): what the worker got wrong is named
// (verify_failed with the reason), a server fault is answered io_error without its raw message
// and logged with its cause for the operator; an abandoned push leaves no file behind, and one a
// crash interrupts is in the NAR staging area's tmp/, which the sweeper clears.
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import pino from 'pino';
import t from 'tap';
import { PROTOCOL_VERSION, type Message, type MessageOf } from '../../../protocol/index.js';
import { systemClock, WorkerNars, type ConnectedWorker } from '../../../services/index.js';
import { createTestCache } from '../../support/caches.js';
import { startTestKiln } from '../../support/kiln.js';
import { testNarIngest } from '../../support/narIngest.js';
import { makeTestNar } from '../../support/narStorage.js';

t.test('a failed worker push', async (t) => {
  const kiln = await startTestKiln(t);
  const { ingest } = await testNarIngest(kiln);
  const logged: { msg: string; cache?: string; err?: { message: string } }[] = [];
  const log = pino({ level: 'error' }, { write: (line: string) => void logged.push(JSON.parse(line) as (typeof logged)[number]) });
  const nars = new WorkerNars({ sql: kiln.sql, ingest, maxUploadSize: 1 << 20, log, leaseIdleSecs: 300, clock: systemClock });
  const sent: Message[] = [];
  // Only what WorkerNars uses of a connection: its id and the link it answers on.
  const worker = { connectionId: 'failures', link: { send: (m: Message) => sent.push(m) } } as unknown as ConnectedWorker;
  let transferId = 0;

  /** Pushes `data` as the NAR `nar` describes; the last answer. */
  const push = async (cache: string, nar: { info: { storePath: string; narHash: string; narSize: number } }, data: Buffer, beforeEnd?: () => Promise<void>) => {
    const id = ++transferId;
    const info: MessageOf<'narPushStart'>['info'] = { path: nar.info.storePath, narHash: nar.info.narHash, narSize: nar.info.narSize, references: [], deriver: null, ca: null };
    await nars.start(worker, { v: PROTOCOL_VERSION, t: 'narPushStart', transferId: id, jobId: 'build:x:1', targetCaches: [cache], info }, new Set([cache]));
    nars.chunk(worker, { v: PROTOCOL_VERSION, t: 'narChunk', transferId: id, seq: 0, data });
    await beforeEnd?.();
    await nars.end(worker, { v: PROTOCOL_VERSION, t: 'narPushEnd', transferId: id, chunks: 1, narHash: nar.info.narHash, narSize: nar.info.narSize });
    return sent.pop();
  };

  t.test('bytes that are not the NAR the worker announced: verify_failed, naming the problem', async (t) => {
    await createTestCache(kiln.sql, 'main');
    const nar = await makeTestNar(t, { f: 'the announced contents\n' });
    const other = Buffer.from(nar.nar);
    other[other.length - 20]! ^= 1; // the same length, another NarHash
    const answer = await push('main', nar, other);
    t.match(answer, { t: 'narAbort', code: 'verify_failed', reason: /^main: / });
    t.same(logged, [], 'a worker problem is not a server fault');
  });

  t.test('a push stages in the NAR staging area\'s tmp/ and leaves nothing there when abandoned', async (t) => {
    const tmp = join(kiln.nars.staging.root, 'tmp');
    const filesIn = () => readdir(tmp).catch(() => [] as string[]);
    const before = await filesIn();
    const nar = await makeTestNar(t, { f: 'pushed, then abandoned\n' });
    const id = ++transferId;
    const info: MessageOf<'narPushStart'>['info'] = { path: nar.info.storePath, narHash: nar.info.narHash, narSize: nar.info.narSize, references: [], deriver: null, ca: null };
    await nars.start(worker, { v: PROTOCOL_VERSION, t: 'narPushStart', transferId: id, jobId: 'build:x:1', targetCaches: ['main'], info }, new Set(['main']));
    t.match(sent.pop(), { t: 'narCredit', transferId: id });
    t.equal((await filesIn()).length, before.length + 1, 'the push has its file in tmp/');
    await nars.abort(worker, id);
    t.same(await filesIn(), before, 'abandoned: the file is gone');
  });

  t.test('a server fault: io_error for the worker, the cause in the log', async (t) => {
    const gone = await createTestCache(kiln.sql, 'gone');
    const nar = await makeTestNar(t, { f: 'pushed while its cache goes away\n' });
    // The cache goes between narPushStart and narPushEnd: its signing key can no longer be loaded.
    const answer = await push('gone', nar, nar.nar, async () => {
      await kiln.sql`delete from caches where id = ${gone.id}`;
    });
    t.match(answer, { t: 'narAbort', code: 'io_error', reason: 'gone: the server could not store the NAR; its log has the cause' });
    t.match(logged, [{ msg: 'storing a pushed NAR failed', cache: 'gone', err: { message: /cache .* is gone/ } }]);
  });
});
