// The derivation closure of an evaluation, from `nix show-derivation -r`, as /proto
// DerivationNodes in dependency order (every derivation after all of its inputs).
import { z } from 'zod';
import type { DerivationNode } from '../protocol/index.js';
import { nix, nixErrorText } from './nixCli.js';

const ShownDerivation = z.object({
  outputs: z.record(z.string(), z.object({ path: z.string().optional(), hash: z.string().optional(), hashAlgo: z.string().optional() })),
  inputSrcs: z.array(z.string()),
  inputDrvs: z.record(z.string(), z.array(z.string())),
  system: z.string(),
  env: z.record(z.string(), z.string()),
});
type ShownDerivation = z.infer<typeof ShownDerivation>;
const ShownDerivations = z.record(z.string(), ShownDerivation);

/** Roots per `nix show-derivation -r`: the argument list stays far below the kernel's limit. */
const ROOTS_PER_CALL = 200;

const seconds = (value: unknown): number | null => {
  const n = typeof value === 'number' ? value : typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : NaN;
  return Number.isSafeInteger(n) && n >= 0 && n <= 366 * 24 * 3600 ? n : null;
};

/** The attributes that matter to scheduling, from plain env or from `__json` (structured attributes). */
function schedulingAttributes(env: Record<string, string>) {
  let attrs: Record<string, unknown> = env;
  if (typeof env['__json'] === 'string') {
    try {
      attrs = JSON.parse(env['__json']) as Record<string, unknown>;
    } catch {
      attrs = {};
    }
  }
  const features = attrs['requiredSystemFeatures'];
  const list = Array.isArray(features) ? features.filter((f): f is string => typeof f === 'string') : typeof features === 'string' ? features.split(/\s+/) : [];
  const prefer = attrs['preferLocalBuild'];
  return {
    requiredSystemFeatures: list.filter((f) => /^[A-Za-z0-9_.+-]{1,64}$/.test(f)),
    timeoutSecs: seconds(attrs['timeout']),
    maxSilentSecs: seconds(attrs['maxSilent']),
    preferLocalBuild: prefer === true || prefer === '1',
  };
}

export function toDerivationNode(drvPath: string, shown: ShownDerivation): DerivationNode {
  return {
    drvPath,
    name: shown.env['name'] ?? drvPath.slice(44, -4),
    outputs: Object.fromEntries(Object.entries(shown.outputs).map(([name, output]) => [name, output.path ?? null])),
    inputDrvs: shown.inputDrvs,
    inputSrcs: shown.inputSrcs,
    system: shown.system,
    ...schedulingAttributes(shown.env),
    fixedOutput: Object.values(shown.outputs).some((output) => output.hash !== undefined),
  };
}

/** Kahn's algorithm; ties keep the order of the input (drv paths sorted), so the order is stable. */
export function dependencyOrder(nodes: ReadonlyMap<string, DerivationNode>): DerivationNode[] {
  const waiting = new Map<string, number>();
  const dependents = new Map<string, string[]>();
  for (const [drv, node] of [...nodes].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const inputs = Object.keys(node.inputDrvs).filter((input) => nodes.has(input));
    waiting.set(drv, inputs.length);
    for (const input of inputs) (dependents.get(input) ?? dependents.set(input, []).get(input)!).push(drv);
  }
  const ready = [...nodes.keys()].filter((drv) => waiting.get(drv) === 0).sort();
  const order: DerivationNode[] = [];
  for (let head = 0; head < ready.length; head++) {
    const drv = ready[head]!;
    order.push(nodes.get(drv)!);
    for (const dependent of dependents.get(drv) ?? []) {
      const left = waiting.get(dependent)! - 1;
      waiting.set(dependent, left);
      if (left === 0) ready.push(dependent);
    }
  }
  if (order.length !== nodes.size) throw new Error('the derivation graph has a cycle, which Nix never produces');
  return order;
}

export async function derivationClosure(roots: readonly string[], env: NodeJS.ProcessEnv, signal?: AbortSignal): Promise<DerivationNode[]> {
  const nodes = new Map<string, DerivationNode>();
  const pending = [...new Set(roots)].sort();
  while (pending.length > 0) {
    // Roots already inside an earlier closure are not asked for again.
    const batch: string[] = [];
    while (batch.length < ROOTS_PER_CALL && pending.length > 0) {
      const root = pending.shift()!;
      if (!nodes.has(root)) batch.push(root);
    }
    if (batch.length === 0) break;
    const result = await nix(['show-derivation', '-r', ...batch], { env, ...(signal ? { signal } : {}) });
    if (result.exitCode !== 0) throw new Error(`nix show-derivation failed: ${nixErrorText(result.stderr)}`);
    for (const [drv, shown] of Object.entries(ShownDerivations.parse(JSON.parse(result.stdout)))) {
      if (!nodes.has(drv)) nodes.set(drv, toDerivationNode(drv, shown));
    }
  }
  return dependencyOrder(nodes);
}
