// GET nar/<filehash>.nar.zst: the stored file, as is (no Content-Encoding: Nix decompresses it
// itself), always with Content-Length, a single Range as 206, and 404 decided before the first
// byte. Small files come from memory; with S3, larger ones are a redirect to a presigned URL.
import { ApiError, parseNarFileName } from '../../protocol/index.js';
import { looksLikeCacheReadToken, basicPassword, type BinaryCache, type Principal } from '../../services/index.js';
import { isStorageBusy, type BlobRead } from '../../storage/index.js';
import { bytesReply, emptyReply, streamReply, type Reply } from '../reply.js';
import type { Req } from '../request.js';
import type { Router } from '../router.js';
import { parseRange } from './byteRange.js';
import type { CacheRouteServices } from './cacheDeps.js';
import { readableCache, readableCacheInMemory } from './cacheGate.js';
import { narAnswerHead } from './narHeaders.js';
import { stagedNixFile } from './stagedNixFile.js';
import { storageBusyAnswer } from './storageBusyAnswer.js';

/** A presigned URL outlives any sane download start; the client follows it at once. */
const PRESIGN_SECS = 3600;

/** The storage read gate's refusal as the answer a client understands; other errors as they are. */
const storageBusy = (e: unknown): unknown => (isStorageBusy(e) ? storageBusyAnswer(e) : e);

/**
 * The worker a request comes from, for nar.maxConcurrentServes: a build job's read token names a
 * worker's substitution, and the worker is its address. Other requests only count toward the
 * server-wide bound (an address may be a whole NAT'd fleet of people).
 */
const workerOf = (req: Req<Principal>): string | undefined =>
  looksLikeCacheReadToken(basicPassword(req.header('authorization')) ?? '') ? req.peerAddress : undefined;

/**
 * Opens the blob on first read, so a HEAD request (never read) holds no file or connection. A
 * refusal before the first byte is still an answer (http/respond.ts writes it instead of the head).
 */
function lazyBody(open: () => Promise<BlobRead | null>, what: string): AsyncIterable<Uint8Array> {
  return {
    async *[Symbol.asyncIterator]() {
      const read = await open().catch((e: unknown) => { throw storageBusy(e); });
      if (read === null) throw new Error(`${what} vanished from storage after it was found`);
      try {
        yield* read.body;
      } finally {
        read.cancel();
      }
    },
  };
}

const unsatisfiable = (req: Req<Principal>, fileSize: number): ApiError =>
  new ApiError('range_not_satisfiable', `the file has ${fileSize} bytes; the range ${req.header('range')} lies outside it`, {
    headers: { 'Content-Range': `bytes */${fileSize}` },
  });

/**
 * Above this many bytes a small file goes out as a stream of its one buffer: tryEnd's backpressure
 * sends what each reader's socket takes, where end() would have uWS copy the rest, a copy per slow
 * reader (review r7a-1, as the serving threads do: docs/http.md, "Totals").
 */
const SENT_WITH_BACKPRESSURE_ABOVE = 64 * 1024;

async function* onePiece(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}

/** A whole small file, or the range asked for, as the reply. */
function smallFileReply(req: Req<Principal>, cache: BinaryCache, bytes: Buffer): Reply {
  const range = parseRange(req.header('range'), bytes.length);
  if (range.kind === 'unsatisfiable') throw unsatisfiable(req, bytes.length);
  const head = narAnswerHead(cache.public, range, bytes.length);
  const body = head.status === 200 ? bytes : bytes.subarray(head.start, head.start + head.length);
  if (body.length > SENT_WITH_BACKPRESSURE_ABOVE) return streamReply(head.status, body.length, onePiece(body), head.headers);
  return bytesReply(head.status, body, head.headers);
}

/**
 * A small stored file this process holds in memory, answered without one await (most NAR requests
 * of a busy cache); undefined when only the full lookup can tell.
 */
function fromMemory(services: CacheRouteServices, req: Req<Principal>): Reply | undefined {
  const cache = readableCacheInMemory(services.binaryCache, req);
  if (cache === undefined) return undefined;
  const fileHash = parseNarFileName(req.param<string>('file'));
  if (fileHash === undefined) return undefined;
  const known = services.nars.reads.narFileInMemory(cache.id, fileHash);
  if (!known || known.fileSize > services.config['nar.smallBytes']) return undefined;
  const bytes = services.nars.reads.smallNarInMemory(fileHash);
  if (bytes === undefined) return undefined;
  if (!req.isHead) services.caches.traffic.fetched(cache, fileHash, known.fileSize);
  return smallFileReply(req, cache, bytes);
}

async function serveStored(services: CacheRouteServices, req: Req<Principal>, cache: BinaryCache, fileHash: string, fileSize: number): Promise<Reply> {
  const range = parseRange(req.header('range'), fileSize);
  if (range.kind === 'unsatisfiable') throw unsatisfiable(req, fileSize);
  const { reads } = services.nars;
  if (fileSize > services.config['nar.smallBytes'] && services.config['s3.enable']) {
    const url = await reads.presignedNar(fileHash, PRESIGN_SECS);
    if (url !== null) return emptyReply(302, { Location: url, 'Cache-Control': 'no-store' });
  }
  if (fileSize <= services.config['nar.smallBytes']) {
    const bytes = await reads.smallNar(fileHash, workerOf(req)).catch((e: unknown) => { throw storageBusy(e); });
    if (bytes === null) throw new ApiError('not_found', `the NAR file ${fileHash} is missing from storage`);
    return smallFileReply(req, cache, bytes);
  }
  if (!(await reads.narStored(fileHash))) {
    throw new ApiError('not_found', `the NAR file ${fileHash} is missing from storage`);
  }
  const blobRange = range.kind === 'part' ? { start: range.start, end: range.end } : undefined;
  const head = narAnswerHead(cache.public, range, fileSize);
  return streamReply(head.status, head.length, lazyBody(() => reads.openNar(fileHash, blobRange, workerOf(req), req.signal), `NAR file ${fileHash}`), head.headers);
}

export function narFileRoutes(r: Router<Principal>, services: CacheRouteServices): void {
  r.get('/nar/:file', (req) => fromMemory(services, req) ?? lookup(req));

  async function lookup(req: Req<Principal>): Promise<Reply> {
    const cache = await readableCache(services.binaryCache, req);
    const file = req.param<string>('file');
    const fileHash = parseNarFileName(file);
    const known = fileHash !== undefined ? await services.nars.reads.narFile(cache.id, fileHash) : null;
    if (fileHash !== undefined && known) {
      if (!req.isHead) services.caches.traffic.fetched(cache, fileHash, known.fileSize);
      return serveStored(services, req, cache, fileHash, known.fileSize);
    }
    // `nix copy` asks (HEAD) whether a file it is about to upload is there yet.
    const staged = await stagedNixFile(services, req, cache, file);
    if (staged === null) throw new ApiError('not_found', `cache "${cache.name}" has no file nar/${file}`);
    return staged;
  }
}
