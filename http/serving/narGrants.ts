// The main thread's side of the NAR files serving threads send themselves (docs/http.md, "Serving
// threads"): a thread asks whether a request without credentials may read a NAR file of a cache,
// and the answer is the decision the route (http/cache/narFile.ts) takes for that request, from the
// same memos: the cache gate, then whether a path of the cache points at the file. What the threads
// sent comes back as traffic, counted and published as the route's own answers are.
import { isNix32 } from '../../protocol/index.js';
import type { Services } from '../../services/index.js';
import type { ThreadReadPlaces } from '../../storage/index.js';
import { anonymousReadableCache } from '../cache/cacheGate.js';
import type { NarGrant, NarSent } from './threadMessages.js';

export interface ThreadNarServices {
  grant(cache: string, fileHash: string): Promise<NarGrant | null>;
  sent(sent: readonly NarSent[]): void;
  /** nar.maxConcurrentDownloads, one count for the main thread's reads and the threads' */
  readPlaces: ThreadReadPlaces;
}

export function threadNarServices(services: Pick<Services, 'binaryCache' | 'nars' | 'caches'>): ThreadNarServices {
  const { reads } = services.nars;
  return {
    readPlaces: services.nars.readPlaces,
    async grant(name, fileHash) {
      if (fileHash.length !== 52 || !isNix32(fileHash)) return null;
      const cache = await anonymousReadableCache(services.binaryCache, name);
      // Anonymous readers read only public caches; the thread writes a public cache's headers.
      if (cache === null || !cache.public) return null;
      const known = await reads.narFile(cache.id, fileHash);
      if (known === null) return null;
      const path = reads.narFilePath(fileHash);
      if (path === null) return null;
      return { cacheId: cache.id, cache: cache.name, fileHash, fileSize: known.fileSize, path };
    },
    sent(sent) {
      for (const s of sent) services.caches.traffic.fetched({ id: s.cacheId, name: s.cache }, s.fileHash, s.bytes, s.fetches);
    },
  };
}
