// The command-line flag of each option, derived from its path, per subcommand scope.
import { DerivedDefault, type Option } from './option.js';
import { envName, flagName, scopeOf, type Scope } from './naming.js';
import { optionAt, optionPaths, type OptionPath } from './registry.js';

export interface CliFlag {
  readonly path: OptionPath;
  readonly flag: string;
  /** False for bool options: `--use-tls` sets true and `negation` (`--no-use-tls`) sets false. */
  readonly takesValue: boolean;
  readonly negation?: string;
  /** What to show after the flag in help: `--port <port>`. */
  readonly valueName?: string;
  readonly description: string;
}

function valueName(option: Option<unknown>): string {
  if (option.choices) return option.choices.join('|');
  const type = option.type.replace(/^null or /, '');
  if (type.includes('int')) return 'n';
  if (type.startsWith('list')) return 'list';
  if (type.startsWith('attribute set')) return 'json';
  if (type === 'port' || type === 'path') return type;
  return 'value';
}

export function defaultText(option: Option<unknown>): string {
  if (option.default instanceof DerivedDefault) return `derived: ${option.default.how}`;
  return JSON.stringify(option.default);
}

/** The first clause of the meaning is enough for --help; docs/configuration.md has the rest. */
function description(path: OptionPath, option: Option<unknown>): string {
  const clause = option.meaning.split('; ')[0] ?? option.meaning;
  const env = option.env ? `, env ${envName(path)}` : '';
  return `${clause} (${option.type}, default ${defaultText(option)}${env})`;
}

/** The flags of `kiln serve` (scope server) or `kiln worker` (scope worker), for the CLI to register. */
export function cliFlags(scope: Scope): CliFlag[] {
  return optionPaths
    .filter((path) => scopeOf(path) === scope)
    .map((path) => {
      const option = optionAt(path);
      const flag = flagName(path);
      const base = { path, flag, description: description(path, option) };
      return option.isBool
        ? { ...base, takesValue: false, negation: `--no-${flag.slice(2)}` }
        : { ...base, takesValue: true, valueName: valueName(option) };
    });
}
