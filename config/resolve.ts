// Resolving the effective settings: explicit values first, then derived defaults.
import { derivedDefaults, type Resolve } from './derived.js';
import { DerivedDefault } from './option.js';
import { optionAt, optionPaths, type OptionPath, type ValueOf } from './registry.js';
import type { Source } from './source.js';

export interface Setting {
  readonly value: unknown;
  readonly source: Source;
}

/**
 * Every option's effective value: the explicit one if a source gave it, else its default, else
 * its derived default computed from the others (which may themselves be derived).
 */
export function resolveSettings(explicit: ReadonlyMap<OptionPath, Setting>): Map<OptionPath, Setting> {
  const settings = new Map<OptionPath, Setting>(explicit);
  const resolving = new Set<OptionPath>();

  const settingOf = (path: OptionPath): Setting => {
    const known = settings.get(path);
    if (known) return known;
    const fallback = optionAt(path).default;
    if (!(fallback instanceof DerivedDefault)) {
      const setting: Setting = { value: fallback, source: { kind: 'default' } };
      settings.set(path, setting);
      return setting;
    }
    const derive = derivedDefaults[path];
    if (derive === undefined) throw new Error(`${path} is declared derived but derived.ts has no computation for it`);
    if (resolving.has(path)) throw new Error(`derived defaults form a cycle through ${[...resolving, path].join(' → ')}`);
    resolving.add(path);
    // derivedDefaults is typed per path; seen through a union of paths the compiler loses the pairing.
    const value: unknown = (derive as (get: Resolve) => unknown)(get);
    resolving.delete(path);
    const setting: Setting = { value, source: { kind: 'derived' } };
    settings.set(path, setting);
    return setting;
  };
  // The registry's declarations guarantee each path's value has that path's type.
  const get: Resolve = <P extends OptionPath>(path: P) => settingOf(path).value as ValueOf<P>;

  for (const path of optionPaths) settingOf(path);
  return settings;
}
