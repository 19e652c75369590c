// What the local store knows about paths (`nix path-info --json`), in the form a narinfo and a
// NarPushStart carry, and the order to push a closure in (references before referrers).
import { z } from 'zod';
import { toNix32Hash, type PathInfo } from '../protocol/index.js';
import { nix, nixErrorText, nixStore, PATHS_PER_CALL } from './nixCli.js';

const NixPathInfo = z.object({
  path: z.string(),
  narHash: z.string(),
  narSize: z.number(),
  references: z.array(z.string()),
  deriver: z.string().optional(),
  ca: z.string().optional(),
});


/**
 * `nix path-info` reads a .drv argument as "the outputs of this derivation" unless given
 * --derivation, which in turn maps an output argument to its deriver; so each kind is asked alone.
 */
export async function queryPathInfos(paths: readonly string[], env: NodeJS.ProcessEnv): Promise<PathInfo[]> {
  const drvs = paths.filter((p) => p.endsWith('.drv'));
  const others = paths.filter((p) => !p.endsWith('.drv'));
  const infos = [...(await queryKind(drvs, ['--derivation'], env)), ...(await queryKind(others, [], env))];
  const byPath = new Map(infos.map((info) => [info.path, info]));
  return paths.flatMap((p) => byPath.get(p) ?? []);
}

async function queryKind(paths: readonly string[], flags: string[], env: NodeJS.ProcessEnv): Promise<PathInfo[]> {
  const infos: PathInfo[] = [];
  for (let i = 0; i < paths.length; i += PATHS_PER_CALL) {
    const batch = paths.slice(i, i + PATHS_PER_CALL);
    const result = await nix(['path-info', '--json', ...flags, ...batch], { env });
    if (result.exitCode !== 0) throw new Error(`nix path-info failed: ${nixErrorText(result.stderr)}`);
    for (const raw of z.array(NixPathInfo).parse(JSON.parse(result.stdout))) {
      // Nix 2.8 prints SRI (sha256-base64); narinfos and /proto use sha256:<nix32>.
      const narHash = toNix32Hash(raw.narHash, 'sha256');
      if (narHash === undefined) throw new Error(`nix path-info gave ${raw.path} an unreadable narHash ${raw.narHash}`);
      infos.push({
        path: raw.path,
        narHash,
        narSize: raw.narSize,
        references: [...raw.references].sort(),
        deriver: raw.deriver?.endsWith('.drv') ? raw.deriver : null,
        ca: raw.ca ?? null,
      });
    }
  }
  return infos;
}

/** The closure of `paths` (`nix-store --query --requisites`). */
export async function closureOf(paths: readonly string[], env: NodeJS.ProcessEnv): Promise<string[]> {
  const closure = new Set<string>();
  for (let i = 0; i < paths.length; i += PATHS_PER_CALL) {
    const result = await nixStore(['--query', '--requisites', ...paths.slice(i, i + PATHS_PER_CALL)], { env });
    if (result.exitCode !== 0) throw new Error(`nix-store --query --requisites failed: ${nixErrorText(result.stderr)}`);
    for (const line of result.stdout.split('\n')) if (line) closure.add(line);
  }
  return [...closure];
}

/** References before referrers, so a cache never holds a path whose references it lacks. */
export function referencesFirst(infos: readonly PathInfo[]): PathInfo[] {
  const byPath = new Map(infos.map((info) => [info.path, info]));
  const done = new Set<string>();
  const order: PathInfo[] = [];
  const visit = (info: PathInfo) => {
    if (done.has(info.path)) return;
    done.add(info.path);
    for (const reference of info.references) {
      const target = byPath.get(reference);
      if (target && reference !== info.path) visit(target);
    }
    order.push(info);
  };
  for (const info of [...infos].sort((a, b) => a.path.localeCompare(b.path))) visit(info);
  return order;
}
