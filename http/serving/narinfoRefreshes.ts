// Renewing a serving thread's hot narinfo memory (threadHotCache.ts; docs/http.md, "Serving
// threads"), both sides. The thread asks the main thread for the route's answer to an anonymous GET
// (http/cache/narinfo.ts, anonymousNarinfo) by message, not a loopback GET, and in batches: the
// asks of REFRESH_BATCH_MS go in one message, and the main thread's answers go back in one message
// per turn of its event loop. One message per ask cost both threads a message each way at ~450
// asks a second for 1,000 remembered misses (each lives 5 s in every thread), and the main
// thread's lookups of them one query each (now one per batch: storage/nars/narReads.ts). A miss
// that is still a miss comes back as 'miss', and the thread renews the entry it holds.
import type { NarinfoRenewal } from '../cache/narinfo.js';
import type { HotAnswer, Refresh, ThreadHotCache } from './threadHotCache.js';
import type { FromServingThread, NarinfoAsk, ToServingThread } from './threadMessages.js';

/** How long a thread gathers asks before it sends them: a refresh's answer is not waited for (the expired entry is served meanwhile). */
export const REFRESH_BATCH_MS = 50;

interface Asked {
  cache: string;
  file: string;
  /** the memory's generation when asked: an answer to an ask older than an invalidation is not learned */
  generation: number;
  held: HotAnswer;
}

/** The thread's side: ThreadHotCache.get()'s `refresh`, and what to do with the answers. */
export class NarinfoRefreshes {
  private readonly asked = new Map<number, Asked>();
  private asks: NarinfoAsk[] = [];
  private lastId = 0;
  private timer: NodeJS.Timeout | null = null;
  private readonly sendNow = (): void => this.send();

  constructor(private readonly hot: ThreadHotCache, private readonly post: (message: FromServingThread) => void) {}

  /** Asks, with the next batch, for the fresh answer to GET /cache/{cache}/{file}. */
  readonly refresh: Refresh = (cache, file, held) => {
    const id = ++this.lastId;
    this.asked.set(id, { cache, file, generation: this.hot.generation, held });
    this.asks.push({ id, cache, hash: file.slice(0, -'.narinfo'.length), heldMiss: held.status === 404 });
    if (this.timer === null) this.timer = setTimeout(this.sendNow, REFRESH_BATCH_MS);
  };

  /** The main thread's answers to asks of this thread. */
  answered(answers: readonly { id: number; answer: NarinfoRenewal }[]): void {
    for (const { id, answer } of answers) this.one(id, answer);
  }

  private one(id: number, answer: NarinfoRenewal): void {
    const asked = this.asked.get(id);
    if (asked === undefined) return;
    this.asked.delete(id);
    const { cache, file, generation, held } = asked;
    if (answer === 'miss') {
      if (!this.hot.renew(generation, held)) this.hot.refreshFailed(cache, file, false);
      return;
    }
    if (answer !== null && generation === this.hot.generation) {
      const body = Buffer.from(answer.body.buffer, answer.body.byteOffset, answer.body.byteLength);
      this.hot.learn(generation, cache, file, { status: answer.status, contentType: answer.contentType, xCache: answer.xCache, body });
      return;
    }
    this.hot.refreshFailed(cache, file, answer === null);
  }

  private send(): void {
    this.timer = null;
    const asks = this.asks;
    this.asks = [];
    this.post({ t: 'narinfoAsks', asks });
  }
}

/**
 * The main thread's side for one thread: answers each ask as its lookup settles (one slow lookup,
 * an upstream's or the database's, holds back no other), gathering the answers of one turn into one
 * message. A failed lookup is not kept: the thread's next request goes to the main thread, which
 * words the error.
 */
export function narinfoAnswerer(
  narinfos: (cache: string, hash: string, heldMiss: boolean) => Promise<NarinfoRenewal>,
  post: (message: ToServingThread) => void,
): (asks: readonly NarinfoAsk[]) => void {
  let answers: { id: number; answer: NarinfoRenewal }[] = [];
  const send = (): void => {
    const batch = answers;
    answers = [];
    post({ t: 'narinfoAnswers', answers: batch });
  };
  const settled = (id: number, answer: NarinfoRenewal): void => {
    if (answers.length === 0) setImmediate(send);
    answers.push({ id, answer });
  };
  return (asks) => {
    for (const ask of asks) {
      void narinfos(ask.cache, ask.hash, ask.heldMiss).catch(() => null).then((answer) => settled(ask.id, answer));
    }
  };
}
