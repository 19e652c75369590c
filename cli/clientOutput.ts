// How client commands answer: --json prints exactly one JSON document on stdout (the result, or
// {"error": true, "message", "code"} on failure) so scripts can parse it; otherwise people get
// text, with errors on stderr as "kiln: <message>". Exit status: 0 done, 1 failed, 2 refused
// (bad usage, or a question that needs --yes).
import { Option } from 'commander';
import { isApiRequestError } from './apiClient.js';
import { ClientConfigError } from './clientConfig.js';
import { inert, inertLines } from './inertText.js';

export class UsageError extends Error {
  constructor(
    message: string,
    readonly code = 'usage',
  ) {
    super(message);
    this.name = 'UsageError';
  }
}

export interface Output {
  readonly json: boolean;
  /** The command's result: JSON as is, or the text `human` makes of it. */
  result<T>(value: T, human: (value: T) => string): void;
  /** A line for people (stderr), never in JSON mode. */
  note(text: string): void;
}

export function output(json: boolean, stdout: NodeJS.WritableStream = process.stdout, stderr: NodeJS.WritableStream = process.stderr): Output {
  return {
    json,
    result(value, human) {
      stdout.write(json ? `${JSON.stringify(value, null, 2)}\n` : `${human(value)}\n`);
    },
    note(text) {
      if (!json) stderr.write(`${text}\n`);
    },
  };
}

/** Runs a client command, turning every failure into its message and exit status. */
export async function runClientCommand(json: boolean, work: (out: Output) => Promise<void>): Promise<void> {
  const out = output(json);
  try {
    await work(out);
  } catch (e) {
    const refused = e instanceof UsageError || e instanceof ClientConfigError;
    const code = e instanceof UsageError ? e.code : isApiRequestError(e) ? e.code : e instanceof ClientConfigError ? 'not_configured' : 'failed';
    const message = e instanceof Error ? e.message : String(e);
    if (json) process.stdout.write(`${JSON.stringify({ error: true, message, code }, null, 2)}\n`);
    else process.stderr.write(`kiln: ${message}\n`);
    process.exitCode = refused ? 2 : 1;
  }
}

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

export function formatBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${bytes} B` : `${value.toFixed(value < 10 ? 2 : 1)} ${UNITS[unit]}`;
}

/** Columns padded to their widest cell; the last column is not padded. */
export function formatTable(header: string[], unsafeRows: string[][]): string {
  const rows = unsafeRows.map((r) => r.map(inert));
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ');
  return [line(header), ...rows.map(line)].join('\n');
}

/** The parser of an option given several times (`-p a -p b`): the values in order; its default is []. */
export const repeated = (value: string, previous: string[]): string[] => [...previous, value];

/** Every client command's `--json`. */
export const jsonOption = () => new Option('--json', 'print the result as JSON');

/** An API timestamp for a table: to the second, UTC; '-' for none. */
export const formatDate = (iso: string | null): string => (iso === null ? '-' : iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z'));

/** Lines of `Label:  value`, the labels padded to one width (the `show` commands). */
export function formatFields(fields: [string, string][]): string {
  const width = Math.max(...fields.map(([label]) => label.length)) + 2;
  return fields.map(([label, value]) => `${`${label}:`.padEnd(width)}${inertLines(value)}`).join('\n');
}
