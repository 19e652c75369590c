// A synthetic derivation graph shaped like a package set: layers of `width` derivations, each
// (past the first layer) using 1 to 4 inputs, mostly from the layer just below and sometimes
// from any layer below (a deep dependency such as a compiler). Every derivation has one output
// and one source of its own. Nodes come in dependency order, as a worker streams them; the
// attributes are the derivations nothing depends on, as a flake's packages usually are.
import { createHash } from 'node:crypto';
import type { DerivationNode, EvaluatedAttribute } from '../protocol/index.js';

const NIX32 = '0123456789abcdfghijklmnpqrsvwxyz';

/** A valid store path hash part, fixed by `seed`. */
function hashPart(seed: string): string {
  const digest = createHash('sha256').update(seed).digest();
  let out = '';
  for (let i = 0; i < 32; i++) out += NIX32[digest[i]! % 32];
  return out;
}

export interface SyntheticGraph {
  nodes: DerivationNode[];
  attributes: EvaluatedAttribute[];
  edges: number;
}

/** A small deterministic PRNG (mulberry32), so a size always gives the same graph. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function syntheticGraph(size: number, opts: { width?: number; seed?: string } = {}): SyntheticGraph {
  const width = opts.width ?? Math.max(10, Math.round(size / 25));
  const seed = opts.seed ?? `${Date.now()}`;
  const rand = random(size);
  const nodes: DerivationNode[] = [];
  const used = new Set<number>();
  let edges = 0;
  for (let i = 0; i < size; i++) {
    const layer = Math.floor(i / width);
    const inputs = new Set<number>();
    if (layer > 0) {
      const count = 1 + Math.floor(rand() * 4);
      for (let k = 0; k < count; k++) {
        const from = rand() < 0.7 ? layer - 1 : Math.floor(rand() * layer);
        inputs.add(from * width + Math.floor(rand() * width));
      }
    }
    for (const input of inputs) used.add(input);
    edges += inputs.size;
    const name = `pkg-${i}`;
    nodes.push({
      drvPath: `/nix/store/${hashPart(`${seed}/drv/${i}`)}-${name}.drv`,
      name,
      outputs: { out: `/nix/store/${hashPart(`${seed}/out/${i}`)}-${name}` },
      inputDrvs: Object.fromEntries([...inputs].map((input) => [nodes[input]!.drvPath, ['out']])),
      inputSrcs: [`/nix/store/${hashPart(`${seed}/src/${i}`)}-${name}-source`],
      system: 'x86_64-linux', requiredSystemFeatures: [], timeoutSecs: null, maxSilentSecs: null, preferLocalBuild: false, fixedOutput: false,
    });
  }
  const attributes = nodes.flatMap((node, i): EvaluatedAttribute[] => (used.has(i) ? [] : [{
    path: ['packages', 'x86_64-linux', node.name], drvPath: node.drvPath, outputs: node.outputs,
  }]));
  return { nodes, attributes, edges };
}
