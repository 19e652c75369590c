// `kiln config` output: each option's effective value and where it came from; config file checks.
import { ConfigError } from './configError.js';
import { loadConfig, type LoadedConfig } from './load.js';
import { maskValue } from './mask.js';
import type { Scope } from './naming.js';
import { optionAt, optionPaths, type OptionPath } from './registry.js';
import { sourceLabel, type Source } from './source.js';

export interface ConfigRow {
  readonly path: OptionPath;
  /** The effective value, secrets masked. */
  readonly value: unknown;
  readonly source: Source;
  readonly extension: boolean;
  readonly deployment: boolean;
}

/** Every effective value with its source, for `kiln config print`. */
export function describeConfig(loaded: LoadedConfig): ConfigRow[] {
  return optionPaths.map((path) => {
    const option = optionAt(path);
    return {
      path,
      value: maskValue(option.mask, loaded.values[path]),
      source: loaded.sourceOf(path),
      extension: option.extension,
      deployment: option.deployment,
    };
  });
}

/** The rows as aligned text: `path  value  source`, values as JSON so that "" and null stay visible. */
export function renderConfig(rows: readonly ConfigRow[]): string {
  const cells = rows.map((row) => [row.path, JSON.stringify(row.value), sourceLabel(row.source) + (row.extension ? ' (extension)' : '')] as const);
  const pathWidth = Math.max(...cells.map(([path]) => path.length));
  const valueWidth = Math.min(60, Math.max(...cells.map(([, value]) => value.length)));
  return cells.map(([path, value, source]) => `${path.padEnd(pathWidth)}  ${value.padEnd(valueWidth)}  ${source}`.trimEnd()).join('\n');
}

/**
 * `kiln config check FILE`: the problems of a config file on its own (no environment, no flags),
 * including …File options that name unreadable files. Empty when the file is good.
 */
export function checkConfigFile(file: string, scope: Scope): string[] {
  try {
    loadConfig({ scope, file, env: {}, flags: {} });
    return [];
  } catch (error) {
    if (error instanceof ConfigError) return [...error.problems];
    throw error;
  }
}
