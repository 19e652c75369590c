// Plain checks for the events a dispatch emits by the thousand a second (build.<status> and
// build.status_changed, two per build and transition; worker.job_dispatched, one per build sent,
// whose schema was 1 % of the server's CPU in the dispatch bench): their zod schemas cost about as much per
// event as the rest of the event's way (bench/README.md, dispatch). As protocol/proto/fastChecks.ts
// does for frames, a check here only ever says "certainly valid": a content it is unsure of (an
// unknown or undefined field, any violation) goes to the schema, which alone refuses. What it
// returns is what the schema returns: the same fields in the schema's order (the rendered envelope
// is the same text), which test/protocol/events/fastEventChecks.test.ts holds it to.
import { z } from 'zod';
import { BuildContent, BuildFailure, BuildStatusChangedContent, buildStatuses } from './buildEvents.js';
import { JobDispatchedContent } from './runtimeEvents.js';

type Fields = Record<string, unknown>;
type Check = (x: unknown) => boolean;

const UUID = z.regexes.uuid();
const [DASH, ZERO, NINE, A, B, F, ONE, EIGHT] = ['-', '0', '9', 'a', 'b', 'f', '1', '8'].map((c) => c.charCodeAt(0)) as [number, number, number, number, number, number, number, number];
const hex = (c: number): boolean => (c >= ZERO && c <= NINE) || (c >= A && c <= F);
/** PostgreSQL's uuid text (lower case, version 1-8, RFC variant), without the schema's regex, which took as long as the rest. */
function lowerUuid(x: string): boolean {
  if (x.length !== 36) return false;
  for (let i = 0; i < 36; i++) {
    const c = x.charCodeAt(i);
    if (i === 8 || i === 13 || i === 18 || i === 23) {
      if (c !== DASH) return false;
    } else if (i === 14 ? c < ONE || c > EIGHT : i === 19 ? !((c >= EIGHT && c <= NINE) || c === A || c === B) : !hex(c)) return false;
  }
  return true;
}
const STATUSES: ReadonlySet<unknown> = new Set(buildStatuses);
const FAILURES: ReadonlySet<unknown> = new Set(BuildFailure.options);

const str = (min: number, max: number): Check => (x) => typeof x === 'string' && x.length >= min && x.length <= max;
const uuid: Check = (x) => typeof x === 'string' && (lowerUuid(x) || UUID.test(x));
const status: Check = (x) => STATUSES.has(x);
const count: Check = (x) => Number.isSafeInteger(x) && (x as number) >= 0;
const bool: Check = (x) => typeof x === 'boolean';

// the bounds of protocol/events/eventFields.ts and buildEvents.ts
const FIELDS: Record<string, Check> = {
  build_id: uuid, derivation_build: uuid, evaluation_id: uuid, worker: uuid,
  status, previous: (x) => x === null || status(x),
  task: str(1, 63), project: str(3, 127), attr: str(0, 1000), drv_path: str(1, 400),
  entry_point: bool, attempt: count, failure: (x) => FAILURES.has(x),
  job_id: uuid, kind: (x) => x === 'build' || x === 'evaluation',
};

/** The schema's fields in its order (the order of what it returns), each with its check and whether it is required. */
type Shape = readonly { key: string; check: Check; required: boolean }[];

// A field added to the schemas without a check here fails at import (every test), not at emit
// time inside a status transaction (review r4b).
const checkOf = (key: string): Check => {
  const check = FIELDS[key];
  if (!check) throw new Error(`protocol/events/fastEventChecks.ts: the build events' field "${key}" has no plain check; add it to FIELDS with the schema's bounds`);
  return check;
};
const shapeOf = (schema: typeof BuildContent | typeof BuildStatusChangedContent | typeof JobDispatchedContent): Shape => Object.keys(schema.shape).map((key) => ({
  key, check: checkOf(key), required: !schema.shape[key as keyof typeof schema.shape].safeParse(undefined).success,
}));
const BUILD = shapeOf(BuildContent);
const STATUS_CHANGED = shapeOf(BuildStatusChangedContent);
const JOB_DISPATCHED = shapeOf(JobDispatchedContent);

/** The checked content of a build event or worker.job_dispatched, as the schema would return it; null: ask the schema. */
export function certainEventContent(name: string, content: unknown): Fields | null {
  const shape = name === 'build.status_changed' ? STATUS_CHANGED : name === 'worker.job_dispatched' ? JOB_DISPATCHED
    : name.startsWith('build.') && STATUSES.has(name.slice(6)) ? BUILD : null;
  if (shape === null || typeof content !== 'object' || content === null || Object.getPrototypeOf(content) !== Object.prototype) return null;
  const fields = content as Fields;
  const out: Fields = {};
  let present = 0;
  for (const { key, check, required } of shape) {
    const value = fields[key];
    if (value === undefined) {
      // absent: fine when optional; present but undefined: the schema's to say
      if (required || key in fields) return null;
      continue;
    }
    if (!check(value)) return null;
    out[key] = value;
    present++;
  }
  // a field the schema does not name (it would keep it, after its own): the schema's to say
  return Object.keys(fields).length === present ? out : null;
}
