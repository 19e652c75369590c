// Options from environment variables (SERVICE_* names derived from option paths).
import type { Attrs } from './kinds.js';
import { didYouMean } from './closestName.js';
import { envName, envPrefix, flagName } from './naming.js';
import { optionAt, optionPaths, type OptionPath } from './registry.js';
import type { Candidate } from './validate.js';

export type Environment = Readonly<Record<string, string | undefined>>;

export interface EnvLayer {
  readonly candidates: ReadonlyMap<OptionPath, Candidate>;
  /** SERVICE_* variables that set nothing: typos, or options that have no environment variable. */
  readonly warnings: readonly string[];
}

/**
 * The spec's `environmentVariables` "win over other options": its SERVICE_* entries act as
 * environment variables set on top of the real environment (null unsets one). `attrsName` is
 * the option they came from, so a value's source reads `environmentVariables.SERVICE_PORT`.
 */
export function overlayEnvironment(env: Environment, extra: Attrs, attrsName: string): { env: Environment; names: ReadonlyMap<string, string> } {
  const merged: Record<string, string | undefined> = { ...env };
  const names = new Map<string, string>();
  for (const [name, value] of Object.entries(extra)) {
    if (!name.startsWith(envPrefix)) continue;
    if (value === null) delete merged[name];
    else merged[name] = String(value);
    names.set(name, `${attrsName}.${name}`);
  }
  return { env: merged, names };
}

const envNames = new Map(optionPaths.map((path) => [envName(path), path] as const));
const readableEnvNames = optionPaths.filter((path) => optionAt(path).env).map(envName);

export function envLayer(env: Environment, sourceNames: ReadonlyMap<string, string> = new Map()): EnvLayer {
  const candidates = new Map<OptionPath, Candidate>();
  const warnings: string[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith(envPrefix) || value === undefined) continue;
    const path = envNames.get(name);
    if (path === undefined) {
      warnings.push(`${name} is ignored: it names no option${didYouMean(name, readableEnvNames)}`);
    } else if (!optionAt(path).env) {
      warnings.push(`${name} is ignored: ${path} has no environment variable; set it in the config file or with ${flagName(path)}`);
    } else {
      candidates.set(path, { value, isText: true, source: { kind: 'env', name: sourceNames.get(name) ?? name } });
    }
  }
  return { candidates, warnings };
}
