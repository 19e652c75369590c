// Every path that puts a NAR into a cache goes through the ingest front door (services/caches/narIngest.ts),
// so each shows the same three effects: a path it adds is announced (cache.nar.upload), a cache
// without room for it refuses it, and it waits for an upload permit from the UploadBudget. The
// paths: a REST single-shot upload, `nix copy` (PUT nar + narinfo), a worker's /proto push and a
// direct build's closure.
import { createHash } from 'node:crypto';
import pino from 'pino';
import t from 'tap';
import { acquireUpload } from '../../../actors/index.js';
import { PROTOCOL_VERSION, renderNarinfo, sha256Nix32, type Message } from '../../../protocol/index.js';
import { systemClock, WorkerNars, type ConnectedWorker } from '../../../services/index.js';
import type { BusEvent } from '../../../storage/index.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { exportStream, multipartBody, syntheticDrv } from '../../support/directClosure.js';
import { startTestKiln, type TestKiln } from '../../support/kiln.js';
import { testNarIngest, type TestNarIngest } from '../../support/narIngest.js';
import { makeTestNar, type TestNar } from '../../support/narStorage.js';
import { uploadSingle } from '../../support/narUploads.js';

const BYTES_BUDGET = 4 << 20;

/** What a path's attempt came to: stored, or the code of its refusal. */
interface Attempt {
  storePath: string;
  outcome: string;
}

interface IngestPath {
  name: string;
  /** Puts a fresh NAR into `cache` the way this path does. */
  put(cache: string): Promise<Attempt>;
}

/** Waits for `condition`, at most `limitMs` (a bound, not a measurement: it only stops a hung test). */
async function until(what: string, condition: () => boolean | Promise<boolean>, limitMs = 20_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`gave up waiting: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const storePathOf = (e: BusEvent): unknown => (JSON.parse(e.frame) as { content?: { store_path?: unknown } }).content?.store_path;

t.test('every NAR ingest path: event, room check, upload budget', async (t) => {
  const kiln: TestKiln = await startTestKiln(t, { 'upload.bytesBudget': BYTES_BUDGET, 'upload.restWaitSecs': 600 });
  const ada = await signUp(kiln, 'ada');
  await createTestCache(kiln.sql, 'main', { ownerId: ada.id });
  const tiny = await createTestCache(kiln.sql, 'tiny', { ownerId: ada.id });
  await kiln.sql`update caches set max_storage_bytes = 50 where id = ${tiny.id}`;
  const front: TestNarIngest = await testNarIngest(kiln);
  const published: BusEvent[] = [];
  t.teardown(kiln.events.bus.subscribe((e) => published.push(e)));

  const freshNar = (label: string): Promise<TestNar> => makeTestNar(t, { f: `${label} ${published.length} ${Math.random()}\n`.repeat(8) });

  const rest: IngestPath = {
    name: 'REST single-shot upload',
    async put(cache) {
      const nar = await freshNar('rest');
      const narinfo = { store_path: nar.info.storePath, nar_hash: nar.info.narHash, nar_size: nar.info.narSize, references: [] };
      const res = await uploadSingle(kiln, ada.token, cache, { narinfo, nar: nar.nar });
      return { storePath: nar.info.storePath, outcome: res.status === 200 ? 'stored' : String(res.body.code) };
    },
  };

  const basic = { authorization: `Basic ${Buffer.from(`nix:${ada.token}`).toString('base64')}` };
  const nixCopy: IngestPath = {
    name: 'nix copy',
    async put(cache) {
      const nar = await freshNar('nix');
      const file = `${sha256Nix32(createHash('sha256').update(nar.nar).digest()).slice('sha256:'.length)}.nar`;
      const base = `${kiln.url}/cache/${cache}`;
      const outcomeOf = async (res: Response) => ({ storePath: nar.info.storePath, outcome: String(((await res.json()) as { code?: string }).code) });
      const putNar = await fetch(`${base}/nar/${file}`, { method: 'PUT', headers: basic, body: nar.nar });
      if (putNar.status !== 200) return outcomeOf(putNar);
      const text = renderNarinfo({ ...nar.info, url: `nar/${file}`, compression: 'none' });
      const res = await fetch(`${base}/${nar.hash}.narinfo`, { method: 'PUT', headers: basic, body: text });
      return res.status === 200 ? { storePath: nar.info.storePath, outcome: 'stored' } : outcomeOf(res);
    },
  };

  const sent: Message[] = [];
  // Only what WorkerNars uses of a connection: its id and the link it answers on.
  const worker = { connectionId: 'ingest-paths', link: { send: (m: Message) => sent.push(m) } } as unknown as ConnectedWorker;
  const pushes = new WorkerNars({ sql: kiln.sql, ingest: front.ingest, maxUploadSize: 1 << 20, log: pino({ level: 'silent' }), leaseIdleSecs: 300, clock: systemClock });
  let transferId = 0;
  const proto: IngestPath = {
    name: '/proto push',
    async put(cache) {
      const nar = await freshNar('proto');
      const id = ++transferId;
      const answer = () => sent.find((m): m is Extract<Message, { t: 'narAbort' | 'narPushAck' | 'narCredit' }> =>
        (m.t === 'narAbort' || m.t === 'narPushAck' || m.t === 'narCredit') && m.transferId === id);
      const info = { path: nar.info.storePath, narHash: nar.info.narHash, narSize: nar.info.narSize, references: [], deriver: null, ca: null };
      await pushes.start(worker, { v: PROTOCOL_VERSION, t: 'narPushStart', transferId: id, jobId: 'build:x:1', targetCaches: [cache], info }, new Set([cache]));
      const started = answer();
      if (started?.t === 'narAbort') return { storePath: nar.info.storePath, outcome: started.code };
      pushes.chunk(worker, { v: PROTOCOL_VERSION, t: 'narChunk', transferId: id, seq: 0, data: nar.nar });
      await pushes.end(worker, { v: PROTOCOL_VERSION, t: 'narPushEnd', transferId: id, chunks: 1, narHash: nar.info.narHash, narSize: nar.info.narSize });
      const ended = sent.filter((m) => (m.t === 'narAbort' || m.t === 'narPushAck') && m.transferId === id).pop();
      return { storePath: nar.info.storePath, outcome: ended?.t === 'narPushAck' ? 'stored' : ended?.t === 'narAbort' ? ended.code : 'no answer' };
    },
  };

  t.equal((await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } })).status, 200);
  t.equal((await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'app', repository: 'file:///nonexistent' } })).status, 200);
  await kiln.sql`insert into subscriptions (project_id, cache_id, mode) select p.id, c.id, 0 from projects p, caches c where p.name = 'app'`;
  let drvs = 0;
  const direct: IngestPath = {
    name: 'direct build',
    async put(cache) {
      const drv = syntheticDrv(`kiln-ingest-${++drvs}`);
      const { body, contentType } = multipartBody([['project', 'acme/app'], ['cache', cache], ['closure', exportStream([drv])]]);
      const res = await fetch(`${kiln.url}/api/v1/builds`, { method: 'POST', body, headers: { 'content-type': contentType, authorization: `Bearer ${ada.token}` } });
      const json = (await res.json()) as { code?: string };
      return { storePath: drv.drvPath, outcome: res.status === 200 ? 'stored' : String(json.code) };
    },
  };

  for (const path of [rest, nixCopy, proto, direct]) {
    t.test(path.name, async (t) => {
      t.test('a path it adds is announced', async (t) => {
        const attempt = await path.put('main');
        t.equal(attempt.outcome, 'stored');
        await until('cache.nar.upload', () => published.some((e) => e.event === 'cache.nar.upload' && storePathOf(e) === attempt.storePath));
        t.pass('cache.nar.upload names the path');
      });

      t.test('a cache without room for it refuses it', async (t) => {
        const before = published.length;
        const attempt = await path.put('tiny');
        // /proto has its own codes: a NAR that does not fit is too_large.
        t.equal(attempt.outcome, path === proto ? 'too_large' : 'cache_full');
        const hashPart = attempt.storePath.slice('/nix/store/'.length, '/nix/store/'.length + 32);
        const [held] = await kiln.sql<{ n: string }[]>`select count(*) as n from path_signatures where cache_id = ${tiny.id} and hash_part = ${hashPart}`;
        t.equal(Number(held!.n), 0, 'the path was not stored');
        t.notOk(published.slice(before).some((e) => e.event === 'cache.nar.upload'), 'nothing was announced');
      });

      t.test('it waits for an upload permit', async (t) => {
        // All of upload.bytesBudget in one permit: every other upload waits for bytes.
        const held = await acquireUpload(front.budget, { bytes: BYTES_BUDGET });
        let settled = false;
        const attempt = path.put('main').finally(() => {
          settled = true;
        });
        try {
          await until('the upload to wait for a permit', () => front.budget.getSnapshot().context.waiting.length === 1);
          t.equal(settled, false, 'not stored while the budget is spent');
        } finally {
          held.release();
        }
        t.equal((await attempt).outcome, 'stored', 'stored once the permit came');
      });
    });
  }
});
