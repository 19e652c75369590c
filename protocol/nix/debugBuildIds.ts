// The build IDs a NAR carries debug info for, read from its `.ls` listing the way Nix's
// index-debug-info reads them: lib/debug/.build-id/<2 hex>/<38 hex>.debug, regular files only,
// gives the build ID <2 hex><38 hex> and the member path inside the NAR. Nothing else is looked at,
// so a NAR without that directory costs one lookup.
import type { NarListing, NarListingNode } from './narListing.js';

export interface DebugBuildId {
  /** 40 lower-case hex digits */
  buildId: string;
  /** the file inside the NAR, without a leading slash, as Nix's debuginfo/<build id> names it */
  member: string;
}

const BUILD_ID_DIR = ['lib', 'debug', '.build-id'];
const PREFIX = /^[0-9a-f]{2}$/;
const REST = /^([0-9a-f]{38})\.debug$/;

const child = (node: NarListingNode | undefined, name: string): NarListingNode | undefined =>
  node?.type === 'directory' && Object.hasOwn(node.entries, name) ? node.entries[name] : undefined;

export function debugBuildIds(listing: NarListing): DebugBuildId[] {
  let dir: NarListingNode | undefined = listing.root;
  for (const name of BUILD_ID_DIR) dir = child(dir, name);
  if (dir?.type !== 'directory') return [];
  const found: DebugBuildId[] = [];
  for (const [prefix, sub] of Object.entries(dir.entries)) {
    if (!PREFIX.test(prefix) || sub.type !== 'directory') continue;
    for (const [file, node] of Object.entries(sub.entries)) {
      const rest = REST.exec(file);
      if (rest === null || node.type !== 'regular') continue;
      found.push({ buildId: prefix + rest[1]!, member: `${BUILD_ID_DIR.join('/')}/${prefix}/${file}` });
    }
  }
  return found;
}
