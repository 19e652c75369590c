// A Nix store of the worker's own (worker.storeRoot; docs/worker.md, "A store of its own"): Nix's
// chroot store `local?root=<dir>`, whose paths keep their /nix/store names but whose files live
// under <dir>/nix/store, its database and GC roots under <dir>/nix/var/nix. kiln runs the worker
// of every build server on one, so the outputs a server sends back (which Nix does not verify)
// never become valid in the machine's store, where the local worker and other organizations'
// servers would take them for their own.
import { join } from 'node:path';

/** Nix's URI for the store rooted at `root`. */
export const ownStoreUri = (root: string): string => `local?root=${root}`;

/**
 * The environment every Nix child of the worker runs with: NIX_REMOTE names the store, and a
 * `store` line appended to NIX_CONFIG wins over a `store` in nix.conf, which NIX_REMOTE alone
 * would not (it is only the setting's default).
 */
export function ownStoreEnv(env: NodeJS.ProcessEnv, root: string): NodeJS.ProcessEnv {
  const uri = ownStoreUri(root);
  const config = env['NIX_CONFIG'];
  return { ...env, NIX_REMOTE: uri, NIX_CONFIG: `${config ? `${config}\n` : ''}store = ${uri}` };
}

/** Where the files of a store path are on disk: the path itself, or under the worker's store root. */
export const realStorePath = (root: string | null, storePath: string): string => (root === null ? storePath : join(root, storePath));
