// Reading a stored `.ls` listing back and finding one path in it, for the `serve` route: a
// regular file's narOffset and size let the server answer with a byte range of the NAR
// without unpacking it.
import { compareCodePoints, emptyEntries, type NarListing, type NarListingNode } from './narListing.js';
import { parseFailure, parsedOk, type Parsed } from './parsed.js';

export type NarLookupResult =
  | { type: 'regular'; narOffset: number; size: number; executable: boolean }
  | { type: 'directory'; entries: string[] }
  | { type: 'symlink'; target: string };

const MAX_LISTING_DEPTH = 1024;

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isByteCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

function checkNode(value: unknown, at: string, depth: number): Parsed<NarListingNode> {
  if (depth > MAX_LISTING_DEPTH) return parseFailure(at, `nested deeper than ${MAX_LISTING_DEPTH}`);
  if (!isRecord(value)) return parseFailure(at, 'expected an object');
  switch (value.type) {
    case 'regular': {
      if (!isByteCount(value.size)) return parseFailure(`${at}.size`, 'expected a byte count');
      const narOffset = value.narOffset ?? 0;
      if (!isByteCount(narOffset)) return parseFailure(`${at}.narOffset`, 'expected a byte offset');
      if (value.executable !== undefined && typeof value.executable !== 'boolean') {
        return parseFailure(`${at}.executable`, 'expected true or false');
      }
      const base = { type: 'regular' as const, size: value.size, narOffset };
      return parsedOk(value.executable ? { ...base, executable: true as const } : base);
    }
    case 'symlink':
      if (typeof value.target !== 'string') return parseFailure(`${at}.target`, 'expected a string');
      return parsedOk({ type: 'symlink', target: value.target });
    case 'directory': {
      if (!isRecord(value.entries)) return parseFailure(`${at}.entries`, 'expected an object');
      const entries = emptyEntries();
      for (const [name, child] of Object.entries(value.entries)) {
        const checked = checkNode(child, `${at}.entries[${JSON.stringify(name)}]`, depth + 1);
        if (!checked.ok) return checked;
        entries[name] = checked.value;
      }
      return parsedOk({ type: 'directory', entries });
    }
    default:
      return parseFailure(`${at}.type`, 'expected "regular", "directory" or "symlink"');
  }
}

/** Parses `.ls` JSON as Nix writes it (any key order; an omitted narOffset reads as 0). */
export function parseNarListing(text: string): Parsed<NarListing> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    return parseFailure('listing', `not JSON: ${(e as Error).message}`);
  }
  if (!isRecord(json)) return parseFailure('listing', 'expected an object');
  if (json.version !== 1) return parseFailure('version', `expected 1, got ${JSON.stringify(json.version)}`);
  const root = checkNode(json.root, 'root', 0);
  return root.ok ? parsedOk({ version: 1, root: root.value }) : root;
}

/**
 * Finds `path` ("bin/hello", leading and repeated slashes ignored; "" or "/" is the root).
 * Symlinks are not followed, neither at the end nor along the way, so a path through a symlinked
 * directory is not found: what a symlink points at may lie outside this NAR.
 */
export function lookupNarListing(listing: NarListing, path: string): NarLookupResult | undefined {
  let node: NarListingNode = listing.root;
  for (const segment of path.split('/')) {
    if (segment === '') continue;
    if (node.type !== 'directory' || segment === '.' || segment === '..') return undefined;
    if (!Object.prototype.hasOwnProperty.call(node.entries, segment)) return undefined;
    node = node.entries[segment]!;
  }
  if (node.type === 'regular') return { type: 'regular', narOffset: node.narOffset, size: node.size, executable: node.executable === true };
  if (node.type === 'symlink') return { type: 'symlink', target: node.target };
  return { type: 'directory', entries: Object.keys(node.entries).sort(compareCodePoints) };
}
