// Nix's `--log-format internal-json`: one `@nix {json}` line per event on stderr. It tells the
// builder's own output (result type 101) apart from Nix's messages, and gives errors at level 0,
// which is what the failure classifier reads. Pure.
import { stripAnsi } from './childProcess.js';

export type NixLogEvent = { kind: 'log'; text: string } | { kind: 'error'; text: string } | { kind: 'ignore' };

/** Nix's verbosity levels: 0 error, 1 warn, 2 notice, 3 info, 4 talkative, … */
const SHOWN_LEVEL = 3;
/** Nix's result types: a line of the builder's output. */
const RESULT_BUILD_LOG_LINE = 101;

const IGNORE: NixLogEvent = { kind: 'ignore' };

export function parseNixLogLine(line: string): NixLogEvent {
  if (!line.startsWith('@nix ')) return line === '' ? IGNORE : { kind: 'log', text: line };
  let event: unknown;
  try {
    event = JSON.parse(line.slice(5));
  } catch {
    return { kind: 'log', text: line };
  }
  if (typeof event !== 'object' || event === null) return IGNORE;
  const e = event as { action?: unknown; level?: unknown; msg?: unknown; text?: unknown; type?: unknown; fields?: unknown };
  const level = typeof e.level === 'number' ? e.level : SHOWN_LEVEL + 1;
  if (e.action === 'msg' && typeof e.msg === 'string') {
    if (level === 0) return { kind: 'error', text: stripAnsi(e.msg).replace(/^error:\s*/, '') };
    return level <= SHOWN_LEVEL ? { kind: 'log', text: stripAnsi(e.msg) } : IGNORE;
  }
  if (e.action === 'start' && typeof e.text === 'string' && e.text !== '' && level <= SHOWN_LEVEL) return { kind: 'log', text: stripAnsi(e.text) };
  if (e.action === 'result' && e.type === RESULT_BUILD_LOG_LINE && Array.isArray(e.fields) && typeof e.fields[0] === 'string') {
    return { kind: 'log', text: e.fields[0] };
  }
  return IGNORE;
}
