// NAR files a serving thread sends itself (docs/http.md, "Serving threads"): GETs and HEADs of
// /cache/{cache}/nar/{file} without credentials, read from the filesystem blob store and streamed
// with backpressure, Range as the main thread's route answers it. The thread never decides access:
// it asks the main thread (narAsk), whose grant is what the route would decide for that request,
// and keeps the grant for ACCESS_TTL_MS unless an invalidation drops it first. A GET holds a place
// of nar.maxConcurrentDownloads while it reads, waiting for one in the thread's own line
// (storage/nars/threadReadLine.ts: 503 storage_busy in time, as the route) and losing it below the
// minimum pace (storage/nars/readPace.ts). Everything else (credentials, a refusal, a file the cache
// lacks or storage lost, an unsatisfiable range, S3) is forwarded to the main thread, which words
// the answer.
//
// A grant past half its life is asked for again in the background when it is used, or when the
// narinfo naming its file is served (threadHotCache.ts, narServed): a client in steady use, or one
// that fetches narinfos before their NARs as Nix does, finds its grants live instead of waiting
// for one ask per NAR (issue 22: `nix copy --from` of 199 paths waited ~0.5 ms on each).
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { parseRange } from '../cache/byteRange.js';
import { narAnswerHead, type NarAnswerHead } from '../cache/narHeaders.js';
import { storageBusyAnswer } from '../cache/storageBusyAnswer.js';
import { errorReply, streamReply } from '../reply.js';
import { respond, ResponseState } from '../respond.js';
import { openFile, ReadStalled, within, type OpenedFile } from './filePieces.js';
import { paced } from './pacedPieces.js';
import { captureRequest, forwardCaptured, forwardHttp, type CapturedRequest, type ForwardOrigin } from './forwardHttp.js';
import type { NarMemory } from './narMemory.js';
import { sendKept, sendKeptInCallback, type KeptSendOptions } from './threadNarsKept.js';
import type { ThreadAnswers } from './threadAnswers.js';
import { isNarFileName, NAR_SUFFIX } from './narFileName.js';
import { CacheSpellings, NarGrants, RenewalBudget } from './threadNarGrants.js';
import { StorageBusy, watchReadPace, type PaceClock, type ReadPaceLimits, type ThreadReadLine } from '../../storage/threadFace.js';
import { COUNTER_FORWARDED, COUNTER_NARS, COUNTER_NARS_FROM_MEMORY, COUNTER_NARS_WAITED, COUNTER_REQUESTS, COUNTER_STORAGE_BUSY, COUNTER_TOO_SLOW, type NarGrant, type NarSent } from './threadMessages.js';
import { SentNars } from './threadNarsSent.js';

/** Background grant renewals a thread asks for at most, a second (review r5d-1). */
export const RENEWALS_PER_SECOND = 200;

const WHOLE = { kind: 'whole' } as const;
const STALLED = 'stalled';
const emptyBody: AsyncIterable<Uint8Array> = { async *[Symbol.asyncIterator]() {} };
interface Waiting {
  /** when the request began (ThreadAnswers.started()) */
  started: number;
  /** the lower-cased cache name and the URL's file name: the grant is looked up again after every wait */
  cache: string;
  file: string;
  /** the grants' generation when the request was given its grant (start) */
  generation: number;
  res: HttpResponse;
  state: ResponseState;
  captured: CapturedRequest;
  range: string;
  head: boolean;
}

export interface ThreadNarsOptions {
  origin: ForwardOrigin;
  /** the thread's line for places of nar.maxConcurrentDownloads, one count with the main thread's reads (storage/nars/threadReadLine.ts) */
  line: ThreadReadLine | null;
  /** nar.storageOpenTimeoutSecs, for the refusal's wording */
  openTimeoutSecs: number;
  /** the minimum pace of a held read, as the main thread's (storage/nars/readPace.ts) */
  pace: ReadPaceLimits;
  paceClock?: PaceClock;
  /** whether grants can be asked for at all (false: every NAR request is forwarded) */
  enabled: boolean;
  counters: Float64Array;
  /** what the thread answered itself, for the main thread's metrics */
  answers: ThreadAnswers;
  /** small files (up to nar.smallBytes) read once, answered from memory under a live grant */
  small: NarMemory;
  /** medium files (above `small`'s size) read once, answered from memory as small ones are */
  medium: NarMemory;
  ask(id: number, cache: string, fileHash: string): void;
  report(sent: NarSent[]): void;
  /** the grants' clock (tests) */
  now?: () => number;
  /** opens a blob file (tests: a read that stalls) */
  open?: (path: string) => Promise<OpenedFile | null>;
}

export interface ThreadNars {
  /** The uWS handler of GET (head false) and HEAD of /cache/:cache/nar/:file. */
  answer(res: HttpResponse, req: HttpRequest, head: boolean): void;
  /** The main thread's answer to ask `id`. */
  granted(id: number, grant: NarGrant | null): void;
  /** A narinfo naming file `fileHash` of cache `cache` (lower-cased) was served: its grant is renewed if it is worth it. */
  narinfoServed(cache: string, fileHash: string): void;
  /** Reports the files sent since the last report now, if any were. */
  reportNow(): void;
  readonly grants: NarGrants;
}

export function threadNars(opts: ThreadNarsOptions): ThreadNars {
  const { origin, counters } = opts;
  const clock = opts.now ?? Date.now;
  const grants = new NarGrants(clock);
  const spellings = new CacheSpellings();
  /** ask id → what it asked; one ask per cache and file at a time, its waiters in `waiting` */
  const asks = new Map<number, { key: string; cache: string; file: string; generation: number }>();
  const waiting = new Map<string, Waiting[]>();
  let nextAsk = 0;
  const sent = new SentNars(opts.report);
  const reported = (grant: NarGrant): void => sent.add(grant);
  /** whole reads of files to keep under way, by FileHash: one at a time per file, other requests for it wait for its bytes (review r6b-1) */
  const reads = new Map<string, Promise<void>>();

  const forward = (w: Waiting): void => {
    counters[COUNTER_FORWARDED]!++;
    forwardCaptured(w.res, w.captured, origin);
  };

  /**
   * A GET holds a place of nar.maxConcurrentDownloads while it reads (a HEAD reads nothing, as on
   * the route); it waits for one in the thread's line and, none coming in time, is refused as the
   * route refuses: 503 storage_busy with Retry-After. A file in memory, or being read whole for it,
   * needs no place: it is answered from memory (review r6b-3: requests that waited for a grant).
   * After every wait the grant must still be live (stillGranted), else the main thread answers.
   */
  async function send(w: Waiting, grant: NarGrant): Promise<void> {
    const range = parseRange(w.range === '' ? undefined : w.range, grant.fileSize);
    if (range.kind === 'unsatisfiable') return forward(w);
    const answer = narAnswerHead(true, range, grant.fileSize);
    if (!w.head) {
      while (reads.has(grant.fileHash)) await reads.get(grant.fileHash);
      if (w.state.aborted) return;
      if (!stillGranted(w)) return forward(w);
      const kept = fromKept(w, grant, answer);
      if (kept !== null) return kept;
    }
    const { line } = opts;
    if (w.head || line === null) return sendFile(w, grant, range, () => undefined);
    const gone = new AbortController();
    const unsubscribe = w.state.onAbort(() => gone.abort());
    if (w.state.aborted) gone.abort();
    const outcome = await line.take(gone.signal);
    unsubscribe();
    if (outcome === 'gone') return;
    if (outcome === 'busy') return busy(w);
    let given = false;
    const givePlace = () => {
      if (given) return;
      given = true;
      line.give();
    };
    try {
      if (w.state.aborted) return;
      if (!stillGranted(w)) return forward(w);
      await sendFile(w, grant, range, givePlace);
    } finally {
      givePlace();
    }
  }

  /**
   * Whether a request that waited (for another's read, a read place, the file's opening) may still
   * be answered under its grant: no invalidation since it was given (a grant that merely aged past
   * its life during a long wait for a place still holds), or a live grant now (any tenant's
   * invalidation bumps the one generation). Else the cache was made private or the path deleted
   * meanwhile, and the main thread answers instead (review r7a-4).
   */
  const stillGranted = (w: Waiting): boolean => w.generation === grants.generation || grants.get(w.cache, w.file) !== undefined;

  /** No NAR from storage in time, as the route refuses: 503 storage_busy with Retry-After. */
  async function busy(w: Waiting): Promise<void> {
    counters[COUNTER_STORAGE_BUSY]!++;
    await respond(w.res, w.state, errorReply(storageBusyAnswer(new StorageBusy(opts.openTimeoutSecs))), false);
    answered(w.head, w.state, 503, w.started);
  }

  /** `givePlace` gives the read's place back early: a reader below the minimum pace loses it, and its connection. */
  async function sendFile(w: Waiting, grant: NarGrant, range: Exclude<ReturnType<typeof parseRange>, { kind: 'unsatisfiable' }>, givePlace: () => void): Promise<void> {
    const file = await (opts.open ?? openFile)(grant.path);
    if (w.state.aborted) return file?.close();
    if (file === null || file.size !== grant.fileSize) {
      // Storage lost it, or the main thread's word is stale: its route decides (404).
      file?.close();
      grants.forgetFile(grant.cacheId, grant.fileHash);
      return forward(w);
    }
    if (!stillGranted(w)) return (file.close(), forward(w));
    // Granted only to requests without credentials, so only for a public cache's files.
    const answer = narAnswerHead(true, range, grant.fileSize);
    const memory = w.head ? null : memoryFor(file.size);
    if (memory !== null) {
      // Another request's whole read of it (begun while this one waited for its place): its bytes,
      // once kept. A read that failed, or a file gone again, leaves it to the next read.
      while (reads.has(grant.fileHash)) await reads.get(grant.fileHash);
      if (w.state.aborted) return file.close();
      if (!stillGranted(w)) return (file.close(), forward(w));
      const kept = fromKept(w, grant, answer);
      if (kept !== null) return (file.close(), givePlace(), kept);
    }
    // Read whole only to be kept: for the whole file (a range alone does not earn it a place,
    // review r6b-4), into room reserved for it, one read per file at a time (nothing awaited since
    // `reads` was last looked at).
    if (memory !== null && range.kind === 'whole' && memory.reserve(file.size)) {
      // A read that stalls past nar.storageOpenTimeoutSecs gives up its room, its place and its
      // waiters (each then reads for itself): one stalled read holds no request (review r7a-3).
      const read = within(file.whole(), opts.openTimeoutSecs * 1000)
        .then((bytes) => memory.keep(grant.fileHash, bytes), (e: unknown) => (memory.release(file.size), e instanceof ReadStalled ? STALLED : null));
      const entry: Promise<void> = read.then(() => {
        if (reads.get(grant.fileHash) === entry) reads.delete(grant.fileHash);
      });
      reads.set(grant.fileHash, entry);
      const bytes = await read;
      // Nothing more is read from storage, so the read's place goes back before the bytes are written.
      givePlace();
      if (w.state.aborted) return;
      if (bytes === STALLED) return busy(w);
      if (bytes === null) {
        grants.forgetFile(grant.cacheId, grant.fileHash);
        return forward(w);
      }
      if (!stillGranted(w)) return forward(w);
      return fromMemoryAfterWait(w, memory, grant, bytes, answer, false);
    }
    counters[COUNTER_NARS]!++;
    // As the route: a GET is traffic (the file's size), a HEAD is not.
    if (!w.head) reported(grant);
    if (w.head) {
      file.close(); // the pieces never begin
      await respond(w.res, w.state, streamReply(answer.status, answer.length, emptyBody, answer.headers), true);
      return answered(w.head, w.state, answer.status, w.started);
    }
    const pace = watchReadPace(opts.pace, () => (givePlace(), tooSlow(w.res, w.state)), opts.paceClock);
    const body = { [Symbol.asyncIterator]: () => paced(file.pieces(answer.start, answer.start + answer.length), pace) };
    try {
      await respond(w.res, w.state, streamReply(answer.status, answer.length, body, answer.headers), false);
      answered(w.head, w.state, answer.status, w.started);
    } finally {
      pace.stop();
      file.close(); // a client gone before the first piece: the pieces never began
    }
  }

  /** As the main thread's gate: a reader below the minimum pace loses its connection at once (respond.ts then stops). */
  const tooSlow = (res: HttpResponse, state: ResponseState): void => {
    counters[COUNTER_TOO_SLOW]!++;
    if (state.aborted || state.done) return;
    state.done = true;
    res.cork(() => res.close());
    state.abort(); // uWS runs onAborted on close(); once more does nothing
  };
  const keptSends: KeptSendOptions = { pace: opts.pace, paceClock: opts.paceClock, tooSlow };

  /** The memory a file of `size` bytes belongs in: small files', else medium ones', else none (streamed). */
  const memoryFor = (size: number): NarMemory | null =>
    opts.small.holds(size) ? opts.small : opts.medium.holds(size) ? opts.medium : null;

  /** The answer of a file the thread holds, under way; null when it holds none of that size. */
  const fromKept = (w: Waiting, grant: NarGrant, answer: NarAnswerHead): Promise<void> | null => {
    const kept = keptFile(grant);
    return kept === null ? null : fromMemoryAfterWait(w, kept.memory, grant, kept.bytes, answer, true);
  };
  const keptFile = (grant: NarGrant): { memory: NarMemory; bytes: Buffer } | null => {
    const memory = memoryFor(grant.fileSize);
    const bytes = memory?.get(grant.fileHash);
    return memory == null || bytes === undefined || bytes.length !== grant.fileSize ? null : { memory, bytes };
  };

  /** Sends kept bytes to a request that waited (threadNarsKept.ts: no copy into uWS, the read pace watched). */
  async function fromMemoryAfterWait(w: Waiting, memory: NarMemory, grant: NarGrant, bytes: Buffer, answer: NarAnswerHead, kept: boolean): Promise<void> {
    counters[COUNTER_NARS]!++;
    if (kept) counters[COUNTER_NARS_FROM_MEMORY]!++;
    reported(grant);
    await sendKept(keptSends, w.res, w.state, memory, grant.fileHash, bytes, answer);
    answered(false, w.state, answer.status, w.started);
  }

  /**
   * A GET of a file the thread holds, under a live grant: begun inside uWS's handler (a small file
   * is usually answered there whole); no read place taken (nothing is read from storage, as for
   * the main thread's hot cache). False when memory cannot answer it (not kept, or a range the
   * main thread words).
   */
  function fromMemory(res: HttpResponse, grant: NarGrant, rangeHeader: string, started: number): boolean {
    const kept = keptFile(grant);
    if (kept === null) return false;
    const range = rangeHeader === '' ? WHOLE : parseRange(rangeHeader, grant.fileSize);
    if (range.kind === 'unsatisfiable') return false;
    const answer = narAnswerHead(true, range, grant.fileSize);
    counters[COUNTER_NARS]!++;
    counters[COUNTER_NARS_FROM_MEMORY]!++;
    reported(grant);
    const rest = sendKeptInCallback(keptSends, res, kept.memory, grant.fileHash, kept.bytes, answer);
    if (rest === null) opts.answers.request('get', answer.status, started);
    else void rest.then((state) => answered(false, state, answer.status, started));
    return true;
  }

  /** An answer the thread gave, for the HTTP metrics: 499 when the client left before its end, as the main thread counts it. */
  const answered = (head: boolean, state: ResponseState, status: number, started: number): void =>
    opts.answers.request(head ? 'head' : 'get', state.aborted && !state.done ? 499 : status, started);

  /** Asks the main thread for the grant of `file` (`{fileHash}.nar.zst`); `queue` waits for the answer (empty: a renewal no reader waits for). */
  const askFor = (cache: string, file: string, queue: Waiting[]): void => {
    const key = `${cache}/${file}`;
    waiting.set(key, queue);
    const id = nextAsk++;
    asks.set(id, { key, cache, file, generation: grants.generation });
    opts.ask(id, cache, file.slice(0, 52));
  };

  /**
   * Asks again, in the background, for a grant the thread holds that is half through its life; one
   * ask per file at a time, and at most RENEWALS_PER_SECOND a second: past that (a client keeping
   * thousands of files' grants alive by their narinfos, review r5d-1) a reader waits for its grant
   * as before renewals existed.
   */
  const renewals = new RenewalBudget(RENEWALS_PER_SECOND, clock);
  const renew = (cache: string, file: string): void => {
    if (waiting.has(`${cache}/${file}`) || !renewals.take()) return;
    askFor(cache, file, []);
  };

  const start = (w: Waiting, grant: NarGrant): void => {
    w.generation = grants.generation;
    // respond() closes the connection of a body that failed midway; nothing else is left to do.
    send(w, grant).catch(() => undefined);
  };

  return {
    grants,
    reportNow: () => sent.flush(),

    answer(res, req, head) {
      const started = opts.answers.started();
      counters[COUNTER_REQUESTS]!++;
      const cache = spellings.canonical(req.getParameter(0) ?? '');
      const file = req.getParameter(1) ?? '';
      const plain = req.getHeader('authorization') === '' && req.getHeader('content-length') === '' && req.getHeader('transfer-encoding') === '';
      if (!opts.enabled || !plain || cache === null || !isNarFileName(file)) {
        counters[COUNTER_FORWARDED]!++;
        forwardHttp(res, req, origin);
        return;
      }
      const range = req.getHeader('range');
      const grant = grants.get(cache, file);
      if (grant !== undefined && grants.renewDue(grant)) renew(cache, file);
      if (grant !== undefined && !head && fromMemory(res, grant, range, started)) return;
      const captured = captureRequest(res, req, origin);
      if (captured === null) return;
      const state = new ResponseState();
      res.onAborted(() => state.abort());
      const w: Waiting = { started, cache, file, generation: grants.generation, res, state, captured, range, head };
      if (grant !== undefined) {
        start(w, grant);
        return;
      }
      counters[COUNTER_NARS_WAITED]!++;
      const queue = waiting.get(`${cache}/${file}`);
      if (queue !== undefined) queue.push(w);
      else askFor(cache, file, [w]);
    },

    narinfoServed(cache, fileHash) {
      if (!opts.enabled) return;
      const file = fileHash + NAR_SUFFIX;
      if (grants.renewable(cache, file)) renew(cache, file);
    },

    granted(id, grant) {
      const ask = asks.get(id);
      if (ask === undefined) return;
      asks.delete(id);
      const queue = waiting.get(ask.key) ?? [];
      waiting.delete(ask.key);
      // A grant asked for before an invalidation may predate it: the main thread answers these.
      const usable = grant !== null && ask.generation === grants.generation;
      if (usable) grants.keep(ask.cache, grant);
      // A renewal refused: the grant it renews is not used for the rest of its life either.
      else if (grant === null) grants.drop(ask.cache, ask.file);
      for (const w of queue) {
        if (w.state.aborted) continue;
        if (usable) start(w, grant);
        else forward(w);
      }
    },
  };
}
