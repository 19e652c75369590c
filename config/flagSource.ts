// Options from command-line flags.
import { didYouMean } from './closestName.js';
import { commandOf, flagName, scopeOf, type Scope } from './naming.js';
import { isOptionPath, optionPaths, type OptionPath } from './registry.js';
import type { Candidate } from './validate.js';

/** Flags as the CLI hands them over: keyed by option path, text or (bool flags, `--no-x`) a boolean. */
export type FlagValues = Readonly<Record<string, string | boolean | undefined>>;

export function flagLayer(flags: FlagValues, scope: Scope): { candidates: ReadonlyMap<OptionPath, Candidate>; problems: readonly string[] } {
  const candidates = new Map<OptionPath, Candidate>();
  const problems: string[] = [];
  for (const [path, value] of Object.entries(flags)) {
    if (value === undefined) continue;
    if (!isOptionPath(path)) {
      problems.push(`unknown option "${path}" given as a flag${didYouMean(path, optionPaths)}`);
    } else if (scopeOf(path) !== scope) {
      problems.push(`${path} is not a flag of ${commandOf(scope)}; it is ${flagName(path)} of ${commandOf(scopeOf(path))}`);
    } else {
      candidates.set(path, { value, isText: typeof value === 'string', source: { kind: 'flag', name: flagName(path) } });
    }
  }
  return { candidates, problems };
}
