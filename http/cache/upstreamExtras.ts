// log/{drv} and debuginfo/{build_id} falling back to the cache's upstreams (spec: Binary cache):
// what the cache has itself first (`local`, from the build work), else the first upstream's answer.
import type { BinaryCache, Upstreams } from '../../services/index.js';
import { bytesReply, type Reply } from '../reply.js';
import { noCacheExtras, type CacheExtras } from './extras.js';
import { untrustedFileHeaders } from './untrustedContent.js';

export function upstreamExtras(upstreams: Pick<Upstreams, 'fetchUpstreamExtra'>, local: CacheExtras = noCacheExtras): CacheExtras {
  const fromUpstream = async (cache: BinaryCache, path: string, defaultType: string): Promise<Reply | null> => {
    const got = await upstreams.fetchUpstreamExtra(cache.id, path);
    if (got === null) return null;
    // The upstream names the type: anything active is a download (untrustedContent.ts).
    return bytesReply(200, got.body, {
      ...untrustedFileHeaders(got.contentType ?? defaultType, path.slice(path.lastIndexOf('/') + 1)),
      ...(got.contentEncoding === null ? {} : { 'Content-Encoding': got.contentEncoding }),
      'X-Cache': 'MISS',
    });
  };
  return {
    log: async (cache, drv, who) => (await local.log(cache, drv, who)) ?? fromUpstream(cache, `log/${drv}`, 'text/plain; charset=utf-8'),
    debuginfo: async (cache, buildId) => (await local.debuginfo(cache, buildId)) ?? fromUpstream(cache, `debuginfo/${buildId}`, 'application/json'),
  };
}
