// Validating option candidates and the messages that name the option, value and source.
import { maskValue } from './mask.js';
import type { Option } from './option.js';
import { sourceLabel, type Source } from './source.js';

/** A value for one option from one source, before it is checked. */
export interface Candidate {
  readonly value: unknown;
  /** Env and flag values are text and go through the option's text conversion first. */
  readonly isText: boolean;
  readonly source: Source;
}

export type Checked = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly problem: string };

/** How a value is quoted in a message: text as given, anything else as JSON; secrets masked. */
export function shownValue(option: Option<unknown>, value: unknown, isText: boolean): string {
  const masked = maskValue(option.mask, value);
  if (isText && typeof masked === 'string') return masked === '' ? '""' : masked;
  return masked === undefined ? 'undefined' : JSON.stringify(masked);
}

/** The one message format: `nar.chunkBytes=100 from SERVICE_NAR_CHUNK_BYTES: must be an integer from 4096 to 4194304`. */
export function problemMessage(path: string, option: Option<unknown>, value: unknown, isText: boolean, source: Source, expected: string): string {
  return `${path}=${shownValue(option, value, isText)} from ${sourceLabel(source)}: must be ${expected}`;
}

export function checkCandidate(path: string, option: Option<unknown>, candidate: Candidate): Checked {
  const value = candidate.isText && typeof candidate.value === 'string' ? option.fromText(candidate.value) : candidate.value;
  const result = option.schema.safeParse(value);
  if (result.success) return { ok: true, value: result.data };
  return { ok: false, problem: problemMessage(path, option, candidate.value, candidate.isText, candidate.source, option.expected) };
}
