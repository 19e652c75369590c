// The storage read gate's refusal as the answer a client understands (docs/binary-cache.md,
// "Storage reads"): 503 storage_busy with Retry-After, from the route (narFile.ts) and from a
// serving thread's own line (http/serving/threadNars.ts) alike.
import { ApiError } from '../../protocol/threadFace.js';
import type { StorageBusy } from '../../storage/threadFace.js';

/** Nix retries a 503 after a pause; a second is plenty for a storage read place to come free. */
const STORAGE_RETRY_SECS = 1;

export const storageBusyAnswer = (e: StorageBusy): ApiError =>
  new ApiError('storage_busy', `${e.message}: too many NAR reads are running; try again`, { headers: { 'Retry-After': String(STORAGE_RETRY_SECS) } });
