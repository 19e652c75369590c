// Option value kinds: parsing from text and validating.
import { isIP } from 'node:net';
import { z } from 'zod';

/**
 * A value kind: what an option's value looks like, how text from the environment or a flag
 * becomes a candidate value, and how an error completes "must be …".
 */
export interface Kind<T> {
  /** How docs name the type, in the spec's words ("positive int", "null or path"). */
  readonly type: string;
  /** Completes "must be …" in validation messages. */
  readonly expected: string;
  readonly schema: z.ZodType<T>;
  /** Env and flag text → a candidate for `schema`; text that cannot convert is returned as is so the schema rejects it. */
  readonly fromText: (raw: string) => unknown;
  readonly bounds?: { readonly min: number; readonly max: number };
  readonly choices?: readonly string[];
  readonly nullable?: boolean;
  /** Bool options are flags without a value (`--use-tls`, `--no-use-tls`). */
  readonly isBool?: boolean;
}

export const levels = ['trace', 'debug', 'info', 'warn', 'error'] as const;
export type Level = (typeof levels)[number];

const textOf = (raw: string) => raw;

export function bool(): Kind<boolean> {
  return {
    type: 'bool',
    expected: 'true or false',
    schema: z.boolean(),
    isBool: true,
    fromText: (raw) => {
      if (/^(true|1|yes)$/i.test(raw.trim())) return true;
      if (/^(false|0|no)$/i.test(raw.trim())) return false;
      return raw;
    },
  };
}

export function int({ min = 0, max = Number.MAX_SAFE_INTEGER, type }: { min?: number; max?: number; type?: string } = {}): Kind<number> {
  const expected =
    max === Number.MAX_SAFE_INTEGER ? `an integer of ${min} or more` : `an integer from ${min} to ${max}`;
  return {
    type: type ?? `int ${min} to ${max}`,
    expected,
    schema: z.number().int().min(min).max(max),
    bounds: { min, max },
    fromText: (raw) => (/^[+-]?\d+$/.test(raw.trim()) ? Number(raw.trim()) : raw),
  };
}

export const unsignedInt = (): Kind<number> => int({ min: 0, type: 'unsigned int' });
export const positiveInt = (): Kind<number> => int({ min: 1, type: 'positive int' });

/** Listen ports accept 0 ("any free port"), which tests and the embedded defaults rely on. */
export function port({ listen = false }: { listen?: boolean } = {}): Kind<number> {
  const min = listen ? 0 : 1;
  return { ...int({ min, max: 65535 }), type: 'port', expected: `a port number from ${min} to 65535` };
}

export function str({ nonEmpty = false }: { nonEmpty?: boolean } = {}): Kind<string> {
  return {
    type: 'string',
    expected: nonEmpty ? 'a non-empty string' : 'a string',
    schema: nonEmpty ? z.string().min(1) : z.string(),
    fromText: textOf,
  };
}

export function path(): Kind<string> {
  return { type: 'path', expected: 'a non-empty path', schema: z.string().min(1), fromText: textOf };
}

/** A URL of one of the given schemes. Checked by prefix, since WHATWG URL rejects valid libpq URLs such as `postgres://kiln@/kiln`. */
export function url(schemes: readonly string[]): Kind<string> {
  const prefixes = schemes.map((s) => `${s}://`);
  return {
    type: 'string',
    expected: `a URL starting with ${prefixes.join(' or ')}`,
    schema: z.string().refine((v) => prefixes.some((p) => v.toLowerCase().startsWith(p) && v.length > p.length)),
    fromText: textOf,
  };
}

export function ipAddress(): Kind<string> {
  return { type: 'string', expected: 'an IP address', schema: z.string().refine((v) => isIP(v) !== 0), fromText: textOf };
}

function isCidr(v: string): boolean {
  const [ip = '', prefix, extra] = v.split('/');
  const family = isIP(ip);
  if (family === 0 || extra !== undefined) return false;
  if (prefix === undefined) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128);
}

function listFromText(raw: string): unknown {
  const text = raw.trim();
  if (text.startsWith('[')) {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return raw;
    }
  }
  return text === '' ? [] : text.split(',').map((item) => item.trim()).filter((item) => item !== '');
}

const listHow = '(comma-separated or a JSON array)';

export function stringList(): Kind<string[]> {
  return { type: 'list of string', expected: `a list of strings ${listHow}`, schema: z.array(z.string()), fromText: listFromText };
}
export function cidrList(): Kind<string[]> {
  return {
    type: 'list of string',
    expected: `a list of CIDR ranges such as 10.0.0.0/8 ${listHow}`,
    schema: z.array(z.string().refine(isCidr)),
    fromText: listFromText,
  };
}
export function ipList(): Kind<string[]> {
  return {
    type: 'list of string',
    expected: `a list of IP addresses ${listHow}`,
    schema: z.array(z.string().refine((v) => isIP(v) !== 0)),
    fromText: listFromText,
  };
}

export function oneOf<const C extends readonly [string, ...string[]]>(choices: C, type?: string): Kind<C[number]> {
  return {
    type: type ?? choices.join(' or '),
    expected: `one of ${choices.join(', ')}`,
    schema: z.enum(choices),
    choices,
    fromText: (raw) => raw.trim(),
  };
}

export const level = (): Kind<Level> => oneOf(levels, 'level');

export type AttrValue = string | number | boolean | null;
export type Attrs = Record<string, AttrValue>;

export function attrs(): Kind<Attrs> {
  return {
    type: 'attribute set of null/bool/int/string/path',
    expected: 'a JSON object whose values are null, booleans, integers or strings',
    schema: z.record(z.string(), z.union([z.null(), z.boolean(), z.number().int(), z.string()])),
    fromText: (raw) => {
      try {
        return JSON.parse(raw) as unknown;
      } catch {
        return raw;
      }
    },
  };
}

/** Nix's `lines` type: a file may give a list, which is joined by newlines. */
export function lines(): Kind<string> {
  return {
    type: 'strings joined by newline',
    expected: 'a string or a list of strings',
    schema: z.union([z.string(), z.array(z.string()).transform((items) => items.join('\n'))]),
    fromText: textOf,
  };
}

/** PostgreSQL's memory notation as postgresql.conf takes it. */
export function pgMemory(): Kind<string> {
  return {
    type: 'string',
    expected: 'a PostgreSQL memory size such as 512MB (a whole number with kB, MB, GB or TB)',
    schema: z.string().regex(/^\d+\s*(kB|MB|GB|TB)?$/),
    fromText: textOf,
  };
}

/** A package of the deployment (a store path). kiln itself never reads it. */
export function pkg(): Kind<string | null> {
  return { ...nullable(path()), type: 'package' };
}

export function nullable<T>(inner: Kind<T>): Kind<T | null> {
  return {
    ...inner,
    type: `null or ${inner.type}`,
    expected: `null or ${inner.expected}`,
    schema: inner.schema.nullable(),
    nullable: true,
    fromText: (raw) => (raw.trim() === 'null' ? null : inner.fromText(raw)),
  };
}

export function uuid(): Kind<string> {
  return {
    type: 'string',
    expected: 'a UUID such as 0b5e3c1a-9d2f-4c47-8a61-2f0c9e4d7b13',
    schema: z.string().regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i),
    fromText: (raw) => raw.trim(),
  };
}
