// Which locked flake inputs an evaluation may fetch. Pure: a flake.lock (as `nix flake metadata
// --json` prints it under `locks`) in, the refused inputs out. Nix fetches a locked input even in
// pure evaluation mode, so an input pointing at the worker's own files (`path:/var/lib/…`,
// `git+file://…`) would hand them to the tenant's expression: only remote sources pass, and store
// paths, which every local user can read anyway.
import { posix } from 'node:path';
import { z } from 'zod';

const STORE_DIR = '/nix/store/';

/** Types whose locked form names a host Nix reaches over the network. */
const REMOTE_TYPES = new Set(['github', 'gitlab', 'sourcehut']);
/** Types fetched from a `url`, allowed when its scheme is one of REMOTE_SCHEMES. */
const URL_TYPES = new Set(['git', 'hg', 'tarball', 'file']);
const REMOTE_SCHEMES = new Set(['http:', 'https:', 'ssh:', 'git:']);

const LockNode = z.object({
  inputs: z.record(z.string(), z.union([z.string(), z.array(z.string())])).optional(),
  locked: z.record(z.string(), z.unknown()).optional(),
});
export const FlakeLocks = z.object({ nodes: z.record(z.string(), LockNode), root: z.string() });
export type FlakeLocks = z.infer<typeof FlakeLocks>;

export interface RefusedInput {
  /** the input as the flake names it, nested inputs joined by '/' (the node's key when unreachable) */
  input: string;
  reason: string;
}

/** Why a locked source is refused, or null when it is allowed. */
export function refusalOf(locked: Record<string, unknown> | undefined): string | null {
  if (!locked) return 'it is not locked';
  const type = typeof locked['type'] === 'string' ? locked['type'] : '';
  if (REMOTE_TYPES.has(type)) return null;
  if (type === 'path') {
    const path = typeof locked['path'] === 'string' ? locked['path'] : '';
    // normalize: '/nix/store/../etc' is not in the store.
    return posix.isAbsolute(path) && posix.normalize(path).startsWith(STORE_DIR) ? null : `it is the local path ${JSON.stringify(path)}, outside ${STORE_DIR}`;
  }
  if (URL_TYPES.has(type)) {
    const url = typeof locked['url'] === 'string' ? locked['url'] : '';
    const scheme = URL.canParse(url) ? new URL(url).protocol : '';
    return REMOTE_SCHEMES.has(scheme) ? null : `it is a ${type} source at ${JSON.stringify(url)}, not over http(s), ssh or git`;
  }
  return `its type ${JSON.stringify(type)} is not one kiln fetches`;
}

/** Every input of the lock (the root excepted) that is not allowed, named by its input path. */
export function refusedInputs(locks: FlakeLocks): RefusedInput[] {
  const names = new Map<string, string>();
  const visit = (key: string, prefix: string) => {
    for (const [name, target] of Object.entries(locks.nodes[key]?.inputs ?? {})) {
      // A list is a `follows`: the node it points at is reached, and named, on its own path.
      if (typeof target !== 'string' || names.has(target)) continue;
      names.set(target, prefix + name);
      visit(target, `${prefix}${name}/`);
    }
  };
  visit(locks.root, '');
  const refused: RefusedInput[] = [];
  for (const [key, node] of Object.entries(locks.nodes)) {
    if (key === locks.root) continue;
    const reason = refusalOf(node.locked);
    if (reason) refused.push({ input: names.get(key) ?? key, reason });
  }
  return refused;
}

export const ALLOWED_SOURCES = 'github, gitlab, sourcehut, git/hg/tarball/file URLs over http(s), ssh or git, and paths in /nix/store';
