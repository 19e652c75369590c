// log/{drv} and debuginfo/{build_id}: nothing produces build logs or debug info yet, so both
// answer 404 (Nix then moves on). The build and upstream work plugs its lookups in here.
import type { BinaryCache, Principal } from '../../services/index.js';
import type { Reply } from '../reply.js';

export interface CacheExtras {
  /** The build log of a derivation (`log/<drv base name>`) as `who` may read it, or null when there is none. */
  log(cache: BinaryCache, drv: string, who: Principal): Promise<Reply | null>;
  /** Debug info by ELF build ID (`debuginfo/<build id>`), or null. */
  debuginfo(cache: BinaryCache, buildId: string): Promise<Reply | null>;
}

export const noCacheExtras: CacheExtras = {
  log: async () => null,
  debuginfo: async () => null,
};
