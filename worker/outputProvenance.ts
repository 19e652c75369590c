// Whose output is already here (docs/builds.md, "Whose completion", the shared store): kiln's own
// workers share one Nix store across tenants, so a build's outputs may already be valid there,
// substituted for another project from a cache this job's project does not read (perhaps filled by
// another organization's build server, which may have returned anything under the path). The worker
// reports such outputs as already built, and pushes them into this project's caches, only when it
// can vouch for them: built in this very store (Nix marks those `ultimate`), or held by one of this
// job's own substituters (its project's caches) with the same NAR hash. Otherwise it lets go of them
// and builds the derivation itself.
import { z } from 'zod';
import type { Substituter } from '../protocol/index.js';
import type { RunOptions } from './childProcess.js';
import { nix } from './nixCli.js';

const LocalInfo = z.array(z.object({ path: z.string(), narHash: z.string(), ultimate: z.boolean().optional() }));
const RemoteInfo = z.array(z.object({ path: z.string(), narHash: z.string() }));

/**
 * Whether every one of these valid paths was built in this store or is held, with the same NAR
 * hash, by one of the job's substituters; false also when Nix cannot say.
 */
export async function vouchedFor(paths: readonly string[], substituters: readonly Substituter[], netrcFile: string | null, run: RunOptions): Promise<boolean> {
  if (paths.length === 0) return true;
  const local = await nix(['path-info', '--json', ...paths], run);
  if (local.exitCode !== 0) return false;
  const infos = LocalInfo.safeParse(JSON.parse(local.stdout));
  if (!infos.success) return false;
  const unvouched = new Map(infos.data.filter((i) => i.ultimate !== true).map((i) => [i.path, i.narHash]));
  for (const substituter of substituters) {
    if (unvouched.size === 0) break;
    // one path at a time: `nix path-info` fails the whole call for a path the cache does not hold
    for (const [path, narHash] of [...unvouched]) {
      const held = await nix(['path-info', '--json', '--store', substituter.url, ...(netrcFile === null ? [] : ['--option', 'netrc-file', netrcFile]), path], run);
      if (held.exitCode !== 0) continue;
      const remote = RemoteInfo.safeParse(JSON.parse(held.stdout));
      if (remote.success && remote.data.some((r) => r.path === path && r.narHash === narHash)) unvouched.delete(path);
    }
  }
  return unvouched.size === 0 && infos.data.length === paths.length;
}
