// A serving thread's NAR grants renewed ahead of need (http/serving/threadNars.ts): a grant used
// past half its life is asked for again in the background (the request is answered at once under
// the grant it holds), and so is one the thread held when the narinfo naming its file is served
// (threadHotCache.ts, narServed), so a client in steady use, or one that fetches a narinfo before its
// NAR as Nix does, never waits for an ask. A grant is never used past its life, a refused renewal
// drops it, and a file the thread never sent is not asked for on a narinfo alone. threadNars runs
// in a real uWS app of this process on a clock the test moves; the test plays the main thread.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import uWS, { type us_listen_socket } from 'uWebSockets.js';
import { NarMemory } from '../../../http/serving/narMemory.js';
import { ThreadAnswers } from '../../../http/serving/threadAnswers.js';
import { ACCESS_TTL_MS } from '../../../http/serving/threadHotCache.js';
import { COUNTER_NARS_WAITED, COUNTERS, type NarGrant } from '../../../http/serving/threadMessages.js';
import { GRANT_RENEW_AFTER_MS } from '../../../http/serving/threadNarGrants.js';
import { RENEWALS_PER_SECOND, threadNars, type ThreadNars } from '../../../http/serving/threadNars.js';
import { originAgent } from '../../../http/serving/forwardHttp.js';
import { DEFAULT_READ_PACE } from '../../../storage/threadFace.js';

const FILE = '0'.repeat(52);
const NEVER_SENT = '1'.repeat(52);
const bytes = Buffer.from('a stored NAR file, as the blob store holds it');
const dir = mkdtempSync(join(tmpdir(), 'kiln-nar-renewal-'));
writeFileSync(join(dir, `${FILE}.nar.zst`), bytes);
const grantOf = (fileHash: string): NarGrant => ({ cacheId: 'c1', cache: 'pub', fileHash, fileSize: bytes.length, path: join(dir, `${fileHash}.nar.zst`) });

interface Harness {
  nars: ThreadNars;
  /** the asks the thread sent the main thread, unanswered */
  asks: { id: number; fileHash: string }[];
  waited(): number;
  get(fileHash?: string): Promise<number>;
  close(): void;
}

async function harness(now: () => number): Promise<Harness> {
  const NOTHING_KEPT = { minFileBytes: 0, maxFileBytes: 0, budget: 0, idleMs: 0 };
  const counters = new Float64Array(new SharedArrayBuffer(COUNTERS * Float64Array.BYTES_PER_ELEMENT));
  const origin = { port: 1, secret: 'unused', agent: originAgent() };
  const asks: { id: number; fileHash: string }[] = [];
  const nars = threadNars({
    origin, line: null, openTimeoutSecs: 1, pace: DEFAULT_READ_PACE, enabled: true, counters,
    answers: new ThreadAnswers(() => undefined, false), small: new NarMemory(NOTHING_KEPT), medium: new NarMemory(NOTHING_KEPT),
    ask: (id, _cache, fileHash) => asks.push({ id, fileHash }), report: () => undefined, now,
  });
  const app = uWS.App().get('/cache/:cache/nar/:file', (res, req) => nars.answer(res, req, false));
  const listen = await new Promise<us_listen_socket>((resolve, reject) => {
    app.listen('127.0.0.1', 0, (socket) => (socket === false ? reject(new Error('cannot listen')) : resolve(socket)));
  });
  const port = uWS.us_socket_local_port(listen);
  return {
    nars, asks,
    waited: () => counters[COUNTER_NARS_WAITED]!,
    async get(fileHash = FILE) {
      const before = counters[COUNTER_NARS_WAITED];
      let settled = false;
      const answer = fetch(`http://127.0.0.1:${port}/cache/pub/nar/${fileHash}.nar.zst`).then(async (res) => {
        await res.arrayBuffer();
        return res.status;
      }).finally(() => (settled = true));
      while (!settled && counters[COUNTER_NARS_WAITED] === before) await new Promise((r) => setTimeout(r, 2));
      // A request that waits for a grant is answered as the main thread would: with the grant.
      if (counters[COUNTER_NARS_WAITED] !== before) {
        const ask = asks.pop()!;
        nars.granted(ask.id, grantOf(ask.fileHash));
      }
      return answer;
    },
    close() {
      uWS.us_listen_socket_close(listen);
      app.close();
      origin.agent.destroy();
    },
  };
}

t.test('a grant used past half its life is renewed in the background: the reader after its life does not wait', async (t) => {
  let now = 1_000_000;
  const h = await harness(() => now);
  t.teardown(() => h.close());
  t.equal(await h.get(), 200, 'the first reader waits for the grant');
  t.equal(h.waited(), 1);
  now += GRANT_RENEW_AFTER_MS - 1;
  t.equal(await h.get(), 200);
  t.same(h.asks, [], 'a young grant is not asked for again');
  now += 1;
  t.equal(await h.get(), 200, 'answered under the grant it holds');
  t.equal(h.asks.length, 1, 'and its renewal asked for');
  t.equal(h.waited(), 1, 'without waiting for it');
  t.equal(await h.get(), 200);
  t.equal(h.asks.length, 1, 'one renewal at a time');
  h.nars.granted(h.asks.shift()!.id, grantOf(FILE));
  now += ACCESS_TTL_MS - GRANT_RENEW_AFTER_MS + 1; // past the first grant's life
  t.equal(await h.get(), 200);
  t.equal(h.waited(), 1, 'the renewed grant answered');
});

t.test('a grant is never used past its life: a reader after it, with no renewal, waits', async (t) => {
  let now = 1_000_000;
  const h = await harness(() => now);
  t.teardown(() => h.close());
  t.equal(await h.get(), 200);
  now += ACCESS_TTL_MS;
  t.equal(await h.get(), 200);
  t.equal(h.waited(), 2, 'asked again, and waited');
});

t.test('a served narinfo renews the grant of its file ahead of the NAR request', async (t) => {
  let now = 1_000_000;
  const h = await harness(() => now);
  t.teardown(() => h.close());
  t.equal(await h.get(), 200);
  now += ACCESS_TTL_MS * 3; // the grant long expired: the thread sent the file before
  h.nars.narinfoServed('pub', FILE);
  t.equal(h.asks.length, 1, 'asked for on the narinfo');
  h.nars.narinfoServed('pub', FILE);
  t.equal(h.asks.length, 1, 'once');
  h.nars.granted(h.asks.shift()!.id, grantOf(FILE));
  t.equal(await h.get(), 200);
  t.equal(h.waited(), 1, 'the NAR request found it live');
  h.nars.narinfoServed('pub', NEVER_SENT);
  t.same(h.asks, [], 'a file the thread never sent is not asked for on a narinfo alone');
});

t.test('a refused renewal drops the grant it renews', async (t) => {
  let now = 1_000_000;
  const h = await harness(() => now);
  t.teardown(() => h.close());
  t.equal(await h.get(), 200);
  now += GRANT_RENEW_AFTER_MS;
  h.nars.narinfoServed('pub', FILE);
  t.equal(h.asks.length, 1);
  h.nars.granted(h.asks.shift()!.id, null);
  t.equal(await h.get(), 200, 'the next reader asks again (answered by the test)');
  t.equal(h.waited(), 2, 'the grant still within its life was not used');
});

t.test('background renewals are bounded per second: narinfos naming many files do not flood the main thread (review r5d-1)', async (t) => {
  let now = 1_000_000;
  const h = await harness(() => now);
  t.teardown(() => h.close());
  const files = Array.from({ length: RENEWALS_PER_SECOND + 50 }, (_, i) => i.toString(32).padStart(52, '0'));
  for (const file of files) {
    h.nars.grants.keep('pub', grantOf(file));
  }
  now += ACCESS_TTL_MS * 2; // every grant expired: each narinfo would renew one
  for (const file of files) h.nars.narinfoServed('pub', file);
  t.equal(h.asks.length, RENEWALS_PER_SECOND, 'at most RENEWALS_PER_SECOND in one second');
  now += 1_000;
  for (const file of files) h.nars.narinfoServed('pub', file);
  t.equal(h.asks.length, RENEWALS_PER_SECOND + 50, 'the rest in the next second (those asked already wait for their answer)');
});
