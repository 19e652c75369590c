// One cache protocol connection (docs/cache-protocol.md): decides the cache's access as the binary
// cache paths do, again before each request (the memoised answer: seconds old at most), then
// answers queries and NAR downloads. The socket is reached only through
// CacheSocketPort, so this file has no uWS in it. Nothing is sent after the close.
import type { Logger } from 'pino';
import {
  cacheCloseFrame, CACHE_NAR_CHUNK_BYTES, decodeCacheClientMessage, encodeCacheMessage, isApiError, MAX_CLIENT_FRAME_BYTES, MAX_IN_FLIGHT,
  MAX_QUERY_HASHES, type CacheClientMessage, type CacheCloseCode, type CacheOutgoing,
} from '../../protocol/index.js';
import type { BinaryCache, CacheAccess } from '../../services/index.js';
import type { CacheRouteServices } from '../cache/cacheDeps.js';
import { findNarinfo } from '../cache/narinfo.js';
import { openCacheNar } from './cacheNarSource.js';

export interface CacheSocketPort {
  send(bytes: Uint8Array): void;
  /** bytes sent but not yet written to the client */
  bufferedAmount(): number;
  end(closeCode: number, closeReason: string): void;
}

export interface CacheProtoDeps {
  services: CacheRouteServices;
  log: Logger;
}

/** Unwritten bytes past which a NAR download or an answer waits for the socket to drain. */
export const SEND_HIGH_WATER = 1024 * 1024;
/** narinfo lookups one query runs at once: a query of 500 hashes must not take every database connection. */
const LOOKUPS_PER_QUERY = 8;
/** NAR downloads one connection runs at once; the other requested ones wait holding nothing (no file, no bytes). */
const NAR_DOWNLOADS_AT_ONCE = 2;

/** What the refusal of a cache looks like: the same words for no cache and one these credentials may not see. */
type VisibleAccess = Extract<CacheAccess, { kind: 'visible' }>;

const hiddenReason = (name: string) => `no cache "${name}" (a private cache needs an API key or session token)`;

export class CacheProtoConnection {
  private cache: BinaryCache | null = null;
  private closed = false;
  /** requests that came before the access was decided, answered once it is */
  private early: CacheClientMessage[] = [];
  /** requests being answered, by id; a NAR download's controller stops it */
  private readonly inFlight = new Map<number, AbortController>();
  private drainWaiters: (() => void)[] = [];
  /** NAR downloads past the wait for a download place */
  private downloading = 0;
  private placeWaiters: (() => void)[] = [];

  constructor(
    private readonly socket: CacheSocketPort,
    private readonly deps: CacheProtoDeps,
    private readonly name: string,
    private readonly authorization: string | undefined,
    private readonly address: string,
  ) {}

  /** Decides whether these credentials may read the cache: `ready`, or the refusal's close. */
  start(): void {
    void this.readable().then((access) => {
      if (access !== null) this.admit(access);
    });
  }

  /**
   * Whether these credentials may read the cache now (binaryCache's memo: a cache's change at once,
   * a revoked credential within seconds): the access, or null once the connection is closed with
   * the refusal. Asked at the open, before each request, and on the cache's settings change.
   */
  async readable(): Promise<VisibleAccess | null> {
    let access: CacheAccess;
    try {
      access = await this.deps.services.binaryCache.resolve(this.name, this.authorization, this.address);
    } catch (error) {
      await this.refusedBy(error);
      return null;
    }
    if (this.closed) return null;
    // Anonymous on a private cache is refused as an unknown cache is (a socket needs no Basic challenge).
    if (access.kind !== 'visible') {
      this.close('not_found', hiddenReason(this.name));
      return null;
    }
    if (!access.canRead) {
      this.close('forbidden', `viewCache is required on cache "${this.name}"`);
      return null;
    }
    return access;
  }

  /** The cache's settings changed (cache.changed): a connection that may no longer read it closes now. */
  cacheChanged(name: string): void {
    if (this.closed || this.cache === null || name.toLowerCase() !== this.name.toLowerCase()) return;
    void this.readable();
  }

  private async refusedBy(error: unknown): Promise<void> {
    if (isApiError(error) && (error.status === 401 || error.status === 403)) {
      // Junk credentials must not tell a private cache from no cache (the access check looks the
      // cache up first): they are refused as credentials only where anonymous could see the cache.
      const open = await this.deps.services.binaryCache.resolve(this.name, undefined, this.address).catch(() => null);
      if (open?.kind !== 'visible') return this.close('not_found', hiddenReason(this.name));
      return this.close(error.status === 401 ? 'unauthorized' : 'forbidden', error.message);
    }
    if (isApiError(error) && error.status === 404) return this.close('not_found', hiddenReason(this.name));
    this.deps.log.error({ err: error, cache: this.name }, 'a cache protocol connection could not be authorised');
    this.close('internal_error', 'the server could not check these credentials');
  }

  private admit(access: VisibleAccess): void {
    if (this.closed) return;
    this.cache = access.cache;
    this.send({
      t: 'ready', cache: access.cache.name, publicKey: access.cache.publicKey,
      limits: { maxQueryHashes: MAX_QUERY_HASHES, maxInFlight: MAX_IN_FLIGHT, maxFrameBytes: MAX_CLIENT_FRAME_BYTES, narChunkBytes: CACHE_NAR_CHUNK_BYTES },
    });
    for (const message of this.early.splice(0)) this.handle(message);
  }

  /** A frame from the socket (a copy: uWS reuses its buffer). */
  received(data: Uint8Array, binary: boolean): void {
    if (this.closed) return;
    if (!binary) return this.close('malformed_message', 'text frames are not part of the cache protocol');
    const decoded = decodeCacheClientMessage(data);
    if (!decoded.ok) return this.close(decoded.code, decoded.reason);
    if (this.cache === null) {
      // Held until the access is decided, bounded as requests in flight are.
      if (this.early.length >= MAX_IN_FLIGHT) return this.close('malformed_message', `more than ${MAX_IN_FLIGHT} requests before ready`);
      this.early.push(decoded.value);
      return;
    }
    this.handle(decoded.value);
  }

  private handle(message: CacheClientMessage): void {
    if (message.t === 'cancel') {
      this.inFlight.get(message.id)?.abort();
      return;
    }
    if (this.inFlight.has(message.id)) {
      return this.send({ t: 'error', id: message.id, code: 'duplicate_id', message: `request ${message.id} is still being answered` });
    }
    if (this.inFlight.size >= MAX_IN_FLIGHT) {
      return this.send({ t: 'error', id: message.id, code: 'too_many_requests', message: `${MAX_IN_FLIGHT} requests are already being answered on this connection` });
    }
    const controller = new AbortController();
    this.inFlight.set(message.id, controller);
    const work = message.t === 'query' ? this.query(message.id, message.hashes) : this.nar(message.id, message.hash, controller.signal);
    work.catch((error: unknown) => {
      this.deps.log.error({ err: error, cache: this.name, request: message.t }, 'a cache protocol request failed');
      this.send({ t: 'error', id: message.id, code: 'internal', message: `the server failed on this ${message.t}` });
    }).finally(() => this.inFlight.delete(message.id));
  }

  private async query(id: number, hashes: readonly string[]): Promise<void> {
    // A client that does not read its answers gets no more lookups run for it.
    await this.writable();
    const access = await this.readable();
    if (access === null) return;
    const cache = access.cache;
    const { services } = this.deps;
    const answers: ({ text: Buffer; upstream: boolean } | null)[] = new Array(hashes.length).fill(null);
    let next = 0;
    const lane = async () => {
      while (!this.closed && next < hashes.length) {
        const i = next++;
        answers[i] = await findNarinfo(services, cache, hashes[i]!);
      }
    };
    await Promise.all(Array.from({ length: Math.min(LOOKUPS_PER_QUERY, hashes.length) }, lane));
    if (this.closed) return;
    const found: { hash: string; narinfo: string }[] = [];
    const missing: string[] = [];
    hashes.forEach((hash, i) => {
      const answer = answers[i] ?? null;
      // Counted as GET {hash}.narinfo counts (cache.narinfo.served, kiln_cache_narinfo_*).
      services.caches.traffic.served(cache, hash, answer !== null, answer?.upstream ?? false);
      if (answer === null) missing.push(hash);
      else found.push({ hash, narinfo: answer.text.toString('utf8') });
    });
    await this.writable();
    this.send({ t: 'paths', id, found, missing });
  }

  private async nar(id: number, hash: string, signal: AbortSignal): Promise<void> {
    // A small NAR is read whole into memory when opened: nothing is opened for a client that is
    // not reading, and at most NAR_DOWNLOADS_AT_ONCE are open per connection.
    if (!(await this.downloadPlace(signal))) return this.send({ t: 'end', id });
    try {
      await this.writable();
      if (signal.aborted) return this.send({ t: 'end', id });
      const access = await this.readable();
      if (access === null) return;
      await this.download(id, hash, access.cache, signal);
    } finally {
      this.downloading--;
      for (const wake of this.placeWaiters.splice(0)) wake();
    }
  }

  /** Waits for one of the connection's download places: false when cancelled or closed first. */
  private async downloadPlace(signal: AbortSignal): Promise<boolean> {
    while (this.downloading >= NAR_DOWNLOADS_AT_ONCE) {
      if (this.closed || signal.aborted) return false;
      await new Promise<void>((resolve) => {
        this.placeWaiters.push(resolve);
        signal.addEventListener('abort', () => resolve(), { once: true });
      });
    }
    if (this.closed || signal.aborted) return false;
    this.downloading++;
    return true;
  }

  private async download(id: number, hash: string, cache: BinaryCache, signal: AbortSignal): Promise<void> {
    let source;
    try {
      source = await openCacheNar(this.deps.services, cache, hash, signal);
    } catch (error) {
      // cancelled (or the socket closed) while the read was waiting for a storage place
      if (signal.aborted) return this.send({ t: 'end', id });
      throw error;
    }
    if (source.kind === 'refused') return this.send({ t: 'error', id, code: source.code, message: source.message });
    try {
      await this.writable();
      if (!signal.aborted) {
        this.send({ t: 'narStart', id, hash, url: source.url, size: source.size });
        stream: for await (const piece of source.body) {
          for (let at = 0; at < piece.length; at += CACHE_NAR_CHUNK_BYTES) {
            await this.writable();
            if (signal.aborted) break stream;
            this.send({ t: 'narChunk', id, data: piece.subarray(at, at + CACHE_NAR_CHUNK_BYTES) });
          }
        }
      }
      // A cancelled download ends too, so the client knows the id is free again.
      this.send({ t: 'end', id });
    } catch (error) {
      // After narStart: the bytes sent so far are void (docs/cache-protocol.md).
      const refusal = source.failure(error);
      if (refusal === null) throw error;
      if (refusal.code === 'too_slow') this.deps.log.debug({ cache: this.name, address: this.address, hash }, refusal.message);
      this.send({ t: 'error', id, code: refusal.code, message: refusal.message });
    } finally {
      source.release();
    }
  }

  /** Resolves once the socket has room (or is gone): what keeps a slow reader from filling memory. */
  private writable(): Promise<void> {
    if (this.closed || this.socket.bufferedAmount() < SEND_HIGH_WATER) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  /** The socket wrote what it held back. */
  drained(): void {
    if (!this.closed && this.socket.bufferedAmount() >= SEND_HIGH_WATER) return;
    for (const resolve of this.drainWaiters.splice(0)) resolve();
  }

  private send(message: CacheOutgoing): void {
    if (!this.closed) this.socket.send(encodeCacheMessage(message));
  }

  close(code: CacheCloseCode, reason: string): void {
    if (this.closed) return;
    const frame = cacheCloseFrame(code, reason);
    this.deps.log.debug({ cache: this.name, address: this.address, code, reason }, 'closing a cache protocol connection');
    this.socket.end(frame.closeCode, frame.closeReason);
    this.socketClosed();
  }

  /** The socket closed, from either side: downloads stop and give back what they hold. */
  socketClosed(): void {
    this.closed = true;
    this.early = [];
    for (const controller of this.inFlight.values()) controller.abort();
    for (const resolve of this.drainWaiters.splice(0)) resolve();
    for (const wake of this.placeWaiters.splice(0)) wake();
  }
}
