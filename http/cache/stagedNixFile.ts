// A NAR file `nix copy` has PUT but whose narinfo has not come yet. Nix asks with HEAD whether the
// file exists before it uploads, and kiln cannot tell HEAD from GET in a route, so the staged file
// is served to those who may write the cache (the uploader), and nobody else sees it.
import { isApiError } from '../../protocol/index.js';
import type { BinaryCache, Principal } from '../../services/index.js';
import { streamReply, type Reply } from '../reply.js';
import type { Req } from '../request.js';
import type { CacheRouteServices } from './cacheDeps.js';
import { writableCache } from './cacheGate.js';

const NIX_FILE = /^[0-9a-z]{1,64}\.nar(\.[a-z0-9]{1,5})?$/;

export async function stagedNixFile(services: CacheRouteServices, req: Req<Principal>, cache: BinaryCache, file: string): Promise<Reply | null> {
  if (!NIX_FILE.test(file) || !req.header('authorization')) return null;
  // Someone who may not write the cache is answered as if nothing were staged.
  const writer = await writableCache(services.binaryCache, req).catch((e: unknown) => {
    if (isApiError(e)) return null;
    throw e;
  });
  if (writer === null || writer.id !== cache.id) return null;
  const staged = await services.narUploads.nixStagedFile(writer, file);
  return staged === null ? null : streamReply(200, staged.size, staged.body, { 'Content-Type': 'application/x-nix-nar' });
}
