// Loading the configuration: defaults, file, environment and flags merged, then validated.
import { ConfigError } from './configError.js';
import { readConfigFile } from './configFile.js';
import { envLayer, overlayEnvironment, type Environment } from './envSource.js';
import { flagLayer, type FlagValues } from './flagSource.js';
import type { Attrs } from './kinds.js';
import { scopeOf, type Scope } from './naming.js';
import { isOptionPath, optionAt, optionPaths, type Config, type OptionPath } from './registry.js';
import { resolveSettings, type Setting } from './resolve.js';
import { rules } from './rules.js';
import { readSecretFile, unreadableReason } from './secretFile.js';
import type { Source } from './source.js';
import { checkCandidate, problemMessage, type Candidate } from './validate.js';

export interface LoadOptions {
  readonly scope: Scope;
  /** A JSON config file (`--config`). */
  readonly file?: string;
  /** Defaults to process.env: the loader is the one place kiln reads it. */
  readonly env?: Environment;
  /** Keyed by option path; the CLI maps flag names to paths with cliFlags(). */
  readonly flags?: FlagValues;
  /** For tests and programmatic starts: highest precedence, source `override`. */
  readonly overrides?: Partial<Record<OptionPath, unknown>>;
}

export interface LoadedConfig {
  readonly scope: Scope;
  readonly values: Config;
  sourceOf(path: OptionPath): Source;
  /** Not errors, but worth telling the operator at start (ignored SERVICE_* variables). */
  readonly warnings: readonly string[];
}

type Layer = ReadonlyMap<OptionPath, Candidate>;

function fileLayer(file: string | undefined, problems: string[]): Layer {
  if (file === undefined) return new Map();
  const contents = readConfigFile(file);
  problems.push(...contents.problems);
  return new Map([...contents.entries].map(([path, value]) => [path, { value, isText: false, source: { kind: 'file', name: file } }]));
}

function overrideLayer(overrides: Readonly<Record<string, unknown>>, problems: string[]): Layer {
  const layer = new Map<OptionPath, Candidate>();
  for (const [path, value] of Object.entries(overrides)) {
    if (value === undefined) continue; // Partial<…>: an absent override
    if (isOptionPath(path)) layer.set(path, { value, isText: false, source: { kind: 'override' } });
    else problems.push(`unknown option "${path}" given as an override`);
  }
  return layer;
}

const firstCandidate = (layers: readonly Layer[], path: OptionPath) =>
  layers.map((layer) => layer.get(path)).find((candidate) => candidate !== undefined);

/** The scope's `environmentVariables` from the layers above the environment; problems are reported by the main pass. */
function extraEnvironment(scope: Scope, layers: readonly Layer[]): { attrs: Attrs; path: OptionPath } {
  const path = scope === 'server' ? 'environmentVariables' : 'worker.environmentVariables';
  const candidate = firstCandidate(layers, path);
  const checked = candidate && checkCandidate(path, optionAt(path), candidate);
  return { attrs: checked?.ok ? (checked.value as Attrs) : {}, path };
}

/** database.urlFile wins over database.url: the server reads the file into the effective URL. */
function applyDatabaseUrlFile(settings: Map<OptionPath, Setting>, problems: string[]): void {
  const fileSetting = settings.get('database.urlFile');
  if (typeof fileSetting?.value !== 'string') return;
  const option = optionAt('database.url');
  const source: Source = { kind: 'derived', name: `database.urlFile (${fileSetting.value})` };
  let url: string;
  try {
    url = readSecretFile(fileSetting.value);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    problems.push(problemMessage('database.urlFile', optionAt('database.urlFile'), fileSetting.value, false, fileSetting.source, `a readable file holding the database URL (${reason})`));
    return;
  }
  const checked = checkCandidate('database.url', option, { value: url, isText: true, source });
  if (checked.ok) settings.set('database.url', { value: checked.value, source });
  else problems.push(checked.problem);
}

/** Every …File option of the scope that is set must name a readable file, so a typo fails at start, not at first use. */
function checkSecretFiles(scope: Scope, settings: ReadonlyMap<OptionPath, Setting>, skip: ReadonlySet<OptionPath>, problems: string[]): void {
  for (const path of optionPaths) {
    const setting = settings.get(path);
    if (!path.endsWith('File') || scopeOf(path) !== scope || skip.has(path) || typeof setting?.value !== 'string') continue;
    if (path === 'database.urlFile') continue; // read whole by applyDatabaseUrlFile
    const reason = unreadableReason(setting.value);
    if (reason !== undefined) problems.push(problemMessage(path, optionAt(path), setting.value, false, setting.source, `a readable file (${reason})`));
  }
}

function checkRules(scope: Scope, values: Config, settings: ReadonlyMap<OptionPath, Setting>, skip: ReadonlySet<OptionPath>, problems: string[]): void {
  for (const rule of rules) {
    if (scopeOf(rule.path) !== scope || skip.has(rule.path) || !rule.applies(values) || rule.holds(values)) continue;
    const setting = settings.get(rule.path);
    const expected = typeof rule.expected === 'string' ? rule.expected : rule.expected(values);
    problems.push(problemMessage(rule.path, optionAt(rule.path), setting?.value, false, setting?.source ?? { kind: 'default' }, expected));
  }
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value)) deepFreeze(inner);
  }
  return value;
}

/** Defaults, then the JSON file, then the environment, then flags, then overrides; every problem at once in a ConfigError. */
export function loadConfig(options: LoadOptions): LoadedConfig {
  const problems: string[] = [];
  const file = fileLayer(options.file, problems);
  const flags = flagLayer(options.flags ?? {}, options.scope);
  problems.push(...flags.problems);
  const overrides = overrideLayer(options.overrides ?? {}, problems);

  const extra = extraEnvironment(options.scope, [overrides, flags.candidates, file]);
  const overlay = overlayEnvironment(options.env ?? process.env, extra.attrs, extra.path);
  const env = envLayer(overlay.env, overlay.names);

  const layers = [overrides, flags.candidates, env.candidates, file];
  const explicit = new Map<OptionPath, Setting>();
  const invalid = new Set<OptionPath>();
  for (const path of optionPaths) {
    const candidate = firstCandidate(layers, path);
    if (candidate === undefined) continue;
    const checked = checkCandidate(path, optionAt(path), candidate);
    if (checked.ok) {
      explicit.set(path, { value: checked.value, source: candidate.source });
    } else {
      problems.push(checked.problem);
      invalid.add(path);
    }
  }

  const settings = resolveSettings(explicit);
  if (options.scope === 'server' && !invalid.has('database.urlFile')) applyDatabaseUrlFile(settings, problems);
  checkSecretFiles(options.scope, settings, invalid, problems);
  const values = deepFreeze(Object.fromEntries([...settings].map(([path, setting]) => [path, setting.value]))) as Config;
  checkRules(options.scope, values, settings, invalid, problems);
  if (problems.length > 0) throw new ConfigError(problems);

  return Object.freeze({
    scope: options.scope,
    values,
    warnings: Object.freeze([...env.warnings]),
    sourceOf: (path: OptionPath) => settings.get(path)?.source ?? { kind: 'default' },
  });
}
