// The bytes a cache protocol `nar` request streams: the file its narinfo's URL names, exactly what
// GET /cache/{cache}/{URL} answers (the stored nar/<filehash>.nar.zst, or an upstream's file proxied
// through kiln), found with the same lookups as those routes. Refusals are decided before narStart.
import { parseNarUrl } from '../../protocol/index.js';
import type { BinaryCache } from '../../services/index.js';
import { isStorageBusy, ReaderTooSlow } from '../../storage/index.js';
import type { CacheRouteServices } from '../cache/cacheDeps.js';
import { findNarinfo } from '../cache/narinfo.js';

type RefusalCode = 'not_found' | 'storage_busy' | 'too_slow';

export type CacheNarSource =
  | { kind: 'refused'; code: RefusalCode; message: string }
  | {
      kind: 'open';
      url: string;
      size: number;
      body: AsyncIterable<Uint8Array> | Iterable<Uint8Array>;
      /** gives back the file or connection behind a body not read to its end */
      release(): void;
      /** what the client is told of an error while the body is read; null for a fault of the server */
      failure(error: unknown): { code: RefusalCode; message: string } | null;
    };

const UPSTREAM_URL = /^upstream\/([^/]+)\/([^/]+)\/(.+)$/;

const refused = (code: RefusalCode, message: string): CacheNarSource => ({ kind: 'refused', code, message });

/** What a read's failure tells the client: the storage gate's refusals are the client's to know; anything else is the server's fault. */
const busyFailure = (error: unknown): { code: RefusalCode; message: string } | null => {
  if (isStorageBusy(error)) return { code: 'storage_busy', message: `${error instanceof Error ? error.message : 'storage'}: too many NAR reads are running; try again` };
  // The read gate ends a read its client takes too slowly (nar.storageMinReadBytesPerSec…): the client's doing, not a fault.
  if (error instanceof ReaderTooSlow) return { code: 'too_slow', message: error.message };
  return null;
};

/** A storage read: a refusal of the read gate comes back as the client's refusal; any other failure is thrown. */
async function gated<T>(open: () => Promise<T>): Promise<{ value: T } | { refusal: CacheNarSource }> {
  try {
    return { value: await open() };
  } catch (e) {
    const busy = busyFailure(e);
    if (busy === null) throw e;
    return { refusal: refused(busy.code, busy.message) };
  }
}

/** The narinfo's URL line. */
function urlOf(narinfo: Buffer): string | null {
  for (const line of narinfo.toString('utf8').split('\n')) if (line.startsWith('URL: ')) return line.slice('URL: '.length);
  return null;
}

export async function openCacheNar(services: CacheRouteServices, cache: BinaryCache, hash: string, signal: AbortSignal): Promise<CacheNarSource> {
  const missing = refused('not_found', `cache "${cache.name}" has no path ${hash}`);
  const narinfo = await findNarinfo(services, cache, hash);
  if (narinfo === null) return missing;
  const url = urlOf(narinfo.text);
  if (url === null) return missing;
  const { reads } = services.nars;
  const fileHash = parseNarUrl(url);
  if (fileHash !== undefined) {
    const known = await reads.narFile(cache.id, fileHash);
    if (known === null) return missing;
    const gone = refused('not_found', `the NAR file ${fileHash} is missing from storage`);
    if (known.fileSize <= services.config['nar.smallBytes']) {
      const small = await gated(() => reads.smallNar(fileHash));
      if ('refusal' in small) return small.refusal;
      const bytes = small.value;
      if (bytes === null) return gone;
      services.caches.traffic.fetched(cache, fileHash, bytes.length);
      return { kind: 'open', url, size: bytes.length, body: [bytes], release: () => undefined, failure: busyFailure };
    }
    const read = await gated(() => reads.openNar(fileHash, undefined, undefined, signal));
    if ('refusal' in read) return read.refusal;
    const opened = read.value;
    if (opened === null) return gone;
    services.caches.traffic.fetched(cache, fileHash, opened.size);
    return { kind: 'open', url, size: opened.size, body: opened.body, release: () => opened.cancel(), failure: busyFailure };
  }
  const upstream = UPSTREAM_URL.exec(url);
  if (upstream !== null) {
    const file = await services.caches.upstreams.openUpstreamNar(cache, upstream[1]!, upstream[2]!, upstream[3]!);
    if (file === null) return refused('not_found', `no upstream of cache "${cache.name}" has ${url}`);
    return { kind: 'open', url, size: file.size, body: file.body(null), release: () => undefined, failure: () => null };
  }
  return refused('not_found', `the narinfo of ${hash} names ${url}, which this server does not serve`);
}
