// The local Nix store as `kiln cache upload <store-path>…` reads it: the runtime closure
// (`nix-store --query --requisites`), each path's registration (`nix path-info --json`: NarHash,
// NarSize, references, deriver, CA) and its NAR (`nix-store --dump`, streamed from the child).
import { spawn } from 'node:child_process';
import type { NarUploadInfo } from '../protocol/index.js';

export interface LocalPath extends NarUploadInfo {
  store_path: string;
  nar_size: number;
}

function run(command: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', (e) => reject(new Error(`cannot run ${command}: ${e.message} (is Nix installed and on the PATH?)`, { cause: e })));
    child.on('close', (code) => {
      if (code === 0) resolve(stdout);
      else reject(new Error(`${command} ${args.join(' ')} failed (exit ${code}): ${stderr.trim().slice(-2000)}`));
    });
  });
}

/** The paths themselves and everything they reference, transitively. */
export async function runtimeClosure(paths: string[]): Promise<string[]> {
  const out = await run('nix-store', ['--query', '--requisites', ...paths]);
  return out.split('\n').filter((l) => l !== '');
}

/** The output paths of a derivation in the local store (none when it is not there). */
export async function derivationOutputs(drv: string): Promise<string[]> {
  const out = await run('nix-store', ['--query', '--outputs', drv]).catch(() => '');
  return out.split('\n').filter((l) => l !== '');
}

interface PathInfoJson {
  path?: string;
  narHash: string;
  narSize: number;
  references?: string[];
  deriver?: string | null;
  ca?: string | null;
  valid?: boolean;
}

/** Registration of each path (Nix ≥ 2.19 prints an object keyed by path, older ones an array). */
export async function pathInfos(paths: string[]): Promise<Map<string, LocalPath>> {
  const out = await run('nix', ['--extra-experimental-features', 'nix-command', 'path-info', '--json', ...paths]);
  const parsed = JSON.parse(out) as PathInfoJson[] | Record<string, PathInfoJson | null>;
  const entries: [string, PathInfoJson | null][] = Array.isArray(parsed) ? parsed.map((p) => [p.path ?? '', p]) : Object.entries(parsed);
  const infos = new Map<string, LocalPath>();
  for (const [path, info] of entries) {
    if (info === null || info.valid === false) throw new Error(`${path} is not a valid path in the local Nix store`);
    infos.set(path, {
      store_path: path,
      nar_hash: info.narHash,
      nar_size: info.narSize,
      references: info.references ?? [],
      ...(info.deriver ? { deriver: info.deriver } : {}),
      ...(info.ca ? { ca: info.ca } : {}),
    });
  }
  for (const path of paths) if (!infos.has(path)) throw new Error(`nix path-info printed nothing for ${path}`);
  return infos;
}

/** Dependencies before dependents (a path's references other than itself come first); otherwise the given order. */
export function dependencyOrder(paths: string[], infos: Map<string, LocalPath>): string[] {
  const wanted = new Set(paths);
  const done = new Set<string>();
  const visiting = new Set<string>();
  const order: string[] = [];
  const visit = (path: string) => {
    if (done.has(path) || visiting.has(path)) return;
    visiting.add(path);
    for (const ref of infos.get(path)?.references ?? []) if (ref !== path && wanted.has(ref)) visit(ref);
    visiting.delete(path);
    done.add(path);
    order.push(path);
  };
  for (const path of paths) visit(path);
  return order;
}

/** The NAR of `path` from byte `offset` on, as `nix-store --dump` writes it; the child is killed when reading stops early. */
export function dumpFrom(path: string, offset: number): AsyncIterable<Uint8Array> {
  return {
    async *[Symbol.asyncIterator]() {
      const child = spawn('nix-store', ['--dump', path], { stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
      const exited = new Promise<number | null>((resolve, reject) => {
        child.on('error', reject);
        child.on('close', resolve);
      });
      let finished = false;
      try {
        let skip = offset;
        for await (const chunk of child.stdout as AsyncIterable<Buffer>) {
          if (skip >= chunk.length) {
            skip -= chunk.length;
            continue;
          }
          yield skip > 0 ? chunk.subarray(skip) : chunk;
          skip = 0;
        }
        const code = await exited;
        if (code !== 0) throw new Error(`nix-store --dump ${path} failed (exit ${code}): ${stderr.trim().slice(-2000)}`);
        finished = true;
      } finally {
        if (!finished && child.exitCode === null) child.kill();
      }
    },
  };
}
