// Renewing a serving thread's narinfo memory (http/serving/narinfoRefreshes.ts): the asks of a
// thread go to the main thread in one message, the main thread's answers come back together as
// they settle (a slow lookup holds back no other), a miss that is still one renews the entry the
// thread holds, and no answer to an ask older than an invalidation is learned or renewed.
import t from 'tap';
import type { NarinfoRenewal } from '../../../http/cache/narinfo.js';
import { narinfoAnswerer, NarinfoRefreshes } from '../../../http/serving/narinfoRefreshes.js';
import { HIT_TTL_MS, MISS_TTL_MS, ThreadHotCache } from '../../../http/serving/threadHotCache.js';
import type { FromServingThread, NarinfoAsk, ToServingThread } from '../../../http/serving/threadMessages.js';

const FILES = ['0123456789abcdfghijklmnpqrsvwxyz.narinfo', 'zyxwvsrqpnmlkjihgfdcba9876543210.narinfo', '00000000000000000000000000000000.narinfo'];
const hit = { status: 200, contentType: 'text/x-nix-narinfo', xCache: 'HIT', body: Buffer.from('StorePath: /nix/store/x\n') };
const miss = { status: 404, contentType: 'application/json', xCache: null, body: Buffer.from('{"error":true}') };

/** A thread's memory on a clock the test moves, its refreshes, and the messages they post. */
function thread() {
  const clock = { now: 1_000 };
  const hot = new ThreadHotCache(1 << 20, () => clock.now);
  const posted: FromServingThread[] = [];
  let heard = (): void => undefined;
  const refreshes = new NarinfoRefreshes(hot, (message) => {
    posted.push(message);
    heard();
  });
  const nextPost = () => new Promise<void>((resolve) => (heard = resolve));
  return { clock, hot, refreshes, posted, nextPost };
}

t.test('the asks of a thread go in one message, each saying whether the thread holds a miss', async (t) => {
  const { clock, hot, refreshes, posted, nextPost } = thread();
  hot.learn(hot.generation, 'pub', FILES[0]!, miss);
  hot.learn(hot.generation, 'pub', FILES[1]!, hit);
  hot.learn(hot.generation, 'pub', FILES[2]!, miss);
  clock.now += HIT_TTL_MS; // the misses and the hit expired; the access word is renewed below
  hot.learn(hot.generation, 'other', FILES[0]!, hit);
  hot.learn(hot.generation, 'pub', 'x.narinfo', miss);
  const sent = nextPost();
  for (const file of FILES) hot.get('pub', file, refreshes.refresh);
  for (const file of FILES) hot.get('pub', file, refreshes.refresh);
  await sent;
  t.equal(posted.length, 1, 'one message');
  const asks = (posted[0] as { t: 'narinfoAsks'; asks: NarinfoAsk[] }).asks;
  t.same(asks.map((a) => [a.cache, a.hash, a.heldMiss]), FILES.map((f, i) => ['pub', f.slice(0, 32), i !== 1]), 'one ask per expired entry');
});

t.test('answers: a miss renewed, a hit learned, a refusal dropped; none across an invalidation', async (t) => {
  const { clock, hot, refreshes, posted, nextPost } = thread();
  for (const file of FILES) hot.learn(hot.generation, 'pub', file, miss);
  clock.now += MISS_TTL_MS;
  let sent = nextPost();
  const kept = FILES.map((file) => hot.get('pub', file, refreshes.refresh)!);
  await sent;
  const ids = (posted[0] as { asks: NarinfoAsk[] }).asks.map((a) => a.id);
  const upload: NarinfoRenewal = { status: 200, contentType: 'text/x-nix-narinfo', xCache: 'HIT', body: new Uint8Array(Buffer.from('StorePath: /nix/store/y\n')) };
  refreshes.answered([{ id: ids[0]!, answer: 'miss' }, { id: ids[1]!, answer: upload }]);
  t.equal(hot.get('pub', FILES[0]!), kept[0], 'still a miss: the entry held, renewed (served without a refresh)');
  t.equal(hot.get('pub', FILES[1]!)?.status, 200, 'uploaded by another process: the hit learned');
  refreshes.answered([{ id: ids[2]!, answer: null }]);
  t.equal(hot.get('pub', FILES[2]!), undefined, 'refused: dropped');
  t.equal(hot.get('pub', FILES[0]!), undefined, 'and the cache goes to the main thread until it answers again');

  // Asked, then an upload through this process (the invalidation), then the answers to the asks.
  for (const file of FILES) hot.learn(hot.generation, 'pub', file, miss);
  clock.now += MISS_TTL_MS;
  sent = nextPost();
  for (const file of FILES) hot.get('pub', file, refreshes.refresh);
  await sent;
  const late = (posted[1] as { asks: NarinfoAsk[] }).asks.map((a) => a.id);
  hot.forgetPath(FILES[0]!.slice(0, 32));
  refreshes.answered([{ id: late[0]!, answer: 'miss' }, { id: late[1]!, answer: 'miss' }, { id: late[2]!, answer: upload }]);
  t.equal(hot.get('pub', FILES[0]!), undefined, 'the uploaded path is not renewed as a miss');
  sent = nextPost();
  t.equal(hot.get('pub', FILES[1]!, refreshes.refresh)?.status, 404, 'another path: its stale miss, asked for again');
  t.equal(hot.get('pub', FILES[2]!, refreshes.refresh)?.status, 404, 'and the hit answered before the invalidation is not learned');
  await sent;
  t.same((posted[2] as { asks: NarinfoAsk[] }).asks.map((a) => a.hash), [FILES[1]!.slice(0, 32), FILES[2]!.slice(0, 32)]);
});

t.test('the main thread answers as lookups settle, those of one turn in one message', async (t) => {
  const replies: ToServingThread[] = [];
  let heard = (): void => undefined;
  const nextReply = () => new Promise<void>((resolve) => (heard = resolve));
  let release = (): void => undefined;
  const slow = new Promise<void>((resolve) => (release = resolve));
  const answer = narinfoAnswerer(async (cache, hash, heldMiss) => {
    if (hash === 'slow') await slow;
    if (hash === 'broken') throw new Error('database down');
    return heldMiss ? 'miss' : { status: 404, contentType: 'application/json', xCache: null, body: new Uint8Array(2) };
  }, (message) => {
    replies.push(message);
    heard();
  });
  let replied = nextReply();
  answer([
    { id: 1, cache: 'pub', hash: 'a', heldMiss: true }, { id: 2, cache: 'pub', hash: 'slow', heldMiss: true },
    { id: 3, cache: 'pub', hash: 'b', heldMiss: false }, { id: 4, cache: 'pub', hash: 'broken', heldMiss: true },
  ]);
  await replied;
  const first = replies[0] as { t: 'narinfoAnswers'; answers: { id: number; answer: NarinfoRenewal }[] };
  t.same(first.answers.map((a) => [a.id, a.answer === null || typeof a.answer === 'string' ? a.answer : a.answer.status]), [[1, 'miss'], [3, 404], [4, null]], 'the settled ones together, a failure as null');
  replied = nextReply();
  release();
  await replied;
  t.same((replies[1] as { answers: { id: number }[] }).answers.map((a) => a.id), [2], 'the slow one after');
});
