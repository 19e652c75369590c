// Reading a JSON config file.
import { readFileSync } from 'node:fs';
import { didYouMean } from './closestName.js';
import { isOptionPath, optionPaths, type OptionPath } from './registry.js';

/** The options a JSON config file sets, keyed by path, and what is wrong with the file. */
export interface ConfigFileContents {
  readonly entries: ReadonlyMap<OptionPath, unknown>;
  readonly problems: readonly string[];
}

/** JSON.parse says "… in JSON at position 42 (line 3 column 6)"; the operator wants file:line:column. */
function jsonProblem(file: string, text: string, error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const position = /at position (\d+)/.exec(message);
  const reason = message.replace(/\s*(in JSON )?at position \d+.*$/, '').replace(/\s*\(line \d+ column \d+\)$/, '');
  if (!position) return `${file}: not valid JSON: ${reason}`;
  const before = text.slice(0, Number(position[1]));
  const line = before.split('\n').length;
  const column = before.length - before.lastIndexOf('\n');
  return `${file}:${line}:${column}: not valid JSON: ${reason}`;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const isGroup = (prefix: string) => optionPaths.some((path) => path.startsWith(`${prefix}.`));

/**
 * A file may nest (`{"upload": {"bytesBudget": 1}}`), use dotted keys (`{"upload.bytesBudget": 1}`)
 * or mix both. Nesting stops at an option path, so attribute-set options keep their objects.
 */
function flatten(file: string, object: Record<string, unknown>, prefix: string, entries: Map<OptionPath, unknown>, problems: string[]): void {
  for (const [key, value] of Object.entries(object)) {
    const path = prefix === '' ? key : `${prefix}.${key}`;
    if (isOptionPath(path)) {
      if (entries.has(path)) problems.push(`${path} is set twice in ${file}`);
      entries.set(path, value);
    } else if (isGroup(path) && isPlainObject(value)) {
      flatten(file, value, path, entries, problems);
    } else if (isGroup(path)) {
      problems.push(`"${path}" in ${file} must be an object of ${path}.* options`);
    } else {
      problems.push(`unknown option "${path}" in ${file}${didYouMean(path, optionPaths)}`);
    }
  }
}

export function readConfigFile(file: string): ConfigFileContents {
  const entries = new Map<OptionPath, unknown>();
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    return { entries, problems: [`cannot read config file ${file}: ${error instanceof Error ? error.message : String(error)}`] };
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    return { entries, problems: [jsonProblem(file, text, error)] };
  }
  if (!isPlainObject(parsed)) return { entries, problems: [`${file}: must hold a JSON object of options`] };
  const problems: string[] = [];
  flatten(file, parsed, '', entries, problems);
  return { entries, problems };
}
