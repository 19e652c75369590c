// A project's attribute wildcard: which flake outputs an evaluation builds. Pure; the server
// validates a project's wildcard with it, the worker walks the flake with it (docs/worker.md).
//
//   packages.x86_64-linux.*, checks.*.*, !checks.*.slow-*, "hydraJobs"."a.b"
//
// Comma- or newline-separated patterns of dot-separated segments. `*` as a whole segment matches
// any name; `*` inside a segment matches any run of characters; a "quoted" segment is literal
// (`\"` and `\\` escape). A pattern starting with `!` excludes: it removes every path it matches
// and every path below one it matches, and the walk never evaluates what it excludes.
import { parseFailure, parsedOk, type Parsed } from '../nix/parsed.js';

export type WildcardSegment = { kind: 'any' } | { kind: 'literal'; name: string } | { kind: 'glob'; source: string; regex: string };

export interface AttributeWildcard {
  readonly include: readonly (readonly WildcardSegment[])[];
  readonly exclude: readonly (readonly WildcardSegment[])[];
}

export const MAX_WILDCARD_PATTERNS = 64;
export const MAX_WILDCARD_DEPTH = 32;

/** POSIX extended regex, the dialect of Nix's builtins.match, which must match the whole name. */
const globToRegex = (glob: string): string => glob.split('*').map((part) => part.replace(/[.[\]{}()\\+?^$|]/g, '\\$&')).join('.*');

function bareSegment(text: string): WildcardSegment {
  if (text === '*') return { kind: 'any' };
  if (text.includes('*')) return { kind: 'glob', source: text, regex: globToRegex(text) };
  return { kind: 'literal', name: text };
}

/** Splits one pattern into segments; a failure names the pattern by its position. */
function parsePattern(text: string, field: string): Parsed<WildcardSegment[]> {
  const segments: WildcardSegment[] = [];
  let i = 0;
  for (;;) {
    if (text[i] === '"') {
      let name = '';
      i++;
      while (i < text.length && text[i] !== '"') {
        if (text[i] === '\\' && i + 1 < text.length) i++;
        name += text[i];
        i++;
      }
      if (i >= text.length) return parseFailure(field, `unterminated quoted segment in ${JSON.stringify(text)}`);
      i++;
      segments.push({ kind: 'literal', name });
    } else {
      const end = text.indexOf('.', i);
      const bare = text.slice(i, end === -1 ? text.length : end);
      if (bare === '') return parseFailure(field, `empty segment in ${JSON.stringify(text)} (two dots, or a dot at an end)`);
      if (/[\s"!]/.test(bare)) return parseFailure(field, `segment ${JSON.stringify(bare)} has a space, quote or "!"; quote it: "${bare.replace(/["\\]/g, '\\$&')}"`);
      segments.push(bareSegment(bare));
      i += bare.length;
    }
    if (segments.length > MAX_WILDCARD_DEPTH) return parseFailure(field, `more than ${MAX_WILDCARD_DEPTH} segments`);
    if (i === text.length) return parsedOk(segments);
    if (text[i] !== '.') return parseFailure(field, `expected "." after a quoted segment in ${JSON.stringify(text)}`);
    i++;
    if (i === text.length) return parseFailure(field, `empty segment in ${JSON.stringify(text)} (two dots, or a dot at an end)`);
  }
}

/** Splits on commas and newlines outside quotes. */
function splitPatterns(text: string): string[] {
  const parts: string[] = [];
  let current = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted && c === '\\' && i + 1 < text.length) {
      current += c + text[++i];
      continue;
    }
    if (c === '"') quoted = !quoted;
    if (!quoted && (c === ',' || c === '\n')) {
      parts.push(current);
      current = '';
    } else current += c;
  }
  parts.push(current);
  return parts.map((p) => p.trim()).filter((p) => p !== '');
}

export function parseAttributeWildcard(text: string): Parsed<AttributeWildcard> {
  const patterns = splitPatterns(text);
  if (patterns.length === 0) return parseFailure('attributes', 'the wildcard is empty; give at least one pattern such as packages.x86_64-linux.*');
  if (patterns.length > MAX_WILDCARD_PATTERNS) return parseFailure('attributes', `more than ${MAX_WILDCARD_PATTERNS} patterns`);
  const include: WildcardSegment[][] = [];
  const exclude: WildcardSegment[][] = [];
  for (const [index, pattern] of patterns.entries()) {
    const negated = pattern.startsWith('!');
    const parsed = parsePattern(negated ? pattern.slice(1).trim() : pattern, `attributes pattern ${index + 1}`);
    if (!parsed.ok) return parsed;
    (negated ? exclude : include).push(parsed.value);
  }
  if (include.length === 0) return parseFailure('attributes', 'every pattern starts with "!"; add one that selects something, such as packages.*.*');
  return parsedOk({ include, exclude });
}

export function segmentMatches(segment: WildcardSegment, name: string): boolean {
  if (segment.kind === 'any') return true;
  if (segment.kind === 'literal') return segment.name === name;
  return new RegExp(`^(?:${segment.regex})$`, 's').test(name);
}

const patternMatches = (pattern: readonly WildcardSegment[], path: readonly string[]) =>
  pattern.length === path.length && pattern.every((segment, i) => segmentMatches(segment, path[i]!));

/** Whether an exclude pattern removes `path`: it matches the path or one of its prefixes. */
export const isExcluded = (wildcard: AttributeWildcard, path: readonly string[]): boolean =>
  wildcard.exclude.some((pattern) => pattern.length <= path.length && patternMatches(pattern, path.slice(0, pattern.length)));

/** Whether the wildcard selects the attribute at `path`. */
export const wildcardSelects = (wildcard: AttributeWildcard, path: readonly string[]): boolean =>
  wildcard.include.some((pattern) => patternMatches(pattern, path)) && !isExcluded(wildcard, path);

const BARE_NAME = /^[A-Za-z_][A-Za-z0-9_'-]*$/;

/** `packages.x86_64-linux."a.b"`: names that are not plain identifiers are quoted, as Nix prints them. */
export const formatAttributePath = (path: readonly string[]): string =>
  path.map((name) => (BARE_NAME.test(name) ? name : `"${name.replace(/["\\]/g, '\\$&')}"`)).join('.');
