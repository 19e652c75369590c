// Synthetic derivations for scheduler tests with protocol-level workers (no Nix): random store
// paths in Nix's base-32, a DerivationNode as a worker's evalBatch carries it, a NarHash.
import { randomBytes } from 'node:crypto';

const NIX32 = '0123456789abcdfghijklmnpqrsvwxyz';
export const nix32 = (n: number) => Array.from(randomBytes(n), (b) => NIX32[b % 32]).join('');
export const narHash = () => `sha256:${nix32(52)}`;

/** A derivation named `name` whose inputs are the derivations at `inputs` (their `out`). */
export function derivationNode(name: string, inputs: string[] = []) {
  const drvPath = `/nix/store/${nix32(32)}-${name}.drv`;
  const out = `/nix/store/${nix32(32)}-${name}`;
  return {
    drvPath, out,
    derivation: {
      drvPath, name, outputs: { out }, inputDrvs: Object.fromEntries(inputs.map((i) => [i, ['out']])), inputSrcs: [],
      system: 'x86_64-linux', requiredSystemFeatures: [], timeoutSecs: null, maxSilentSecs: null, preferLocalBuild: false, fixedOutput: false,
    },
  };
}
export type DerivationNodeFixture = ReturnType<typeof derivationNode>;
