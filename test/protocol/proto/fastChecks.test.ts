// The hot frames' plain checks (protocol/proto/fastChecks.ts) vouch only for frames the schema
// accepts: every mutation of a valid frame they pass, the zod schema passes too, and a frame they
// refuse still fails (through the schema) with the schema's field and reason.
import t from 'tap';
import { Packr } from 'msgpackr';
import { decodeMessage, encodeMessage, Message, PROTOCOL_VERSION } from '../../../protocol/index.js';
import { certainlyValid, FAST_CHECKED_TYPES } from '../../../protocol/proto/fastChecks.js';
import { EXAMPLES } from '../../support/protoExamples.js';

const pack = (value: unknown) => new Packr({ useRecords: false }).pack(value);
type Fields = Record<string, unknown>;

/** Replacement values that probe every kind of check: types, bounds, patterns, nulls, nesting. */
const PROBES: unknown[] = [
  undefined, null, true, false, 0, -1, 1.5, 2 ** 53, Number.MAX_SAFE_INTEGER, 366 * 24 * 3600 + 1, Infinity, NaN, '', 'x', 'has space', 'a'.repeat(129), 'a'.repeat(301),
  '/nix/store/lsfjb3hgbdh1w7s3jmdq7a1sk1x41vpg-app', '/nix/store/lsfjb3hgbdh1w7s3jmdq7a1sk1x41vpg-a b.drv', '/tmp/evil.drv', '/nix/store/eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee-x.drv',
  'sha256:short', 'fixed:r:sha256:1b8m03r63zqhnjf7l5wnldhh7c134ap5vpj0850ymkq1iyzicy5s', [], [1], ['main', 'bad name'], {}, { a: 1 }, Buffer.from('x'), new Date(0),
];

/** A deep copy of `value` with the thing at `path` replaced (or deleted when `to` is the DELETE mark). */
const DELETE = Symbol('delete');
function mutate(value: unknown, path: (string | number)[], to: unknown): unknown {
  const copy = structuredClone(value) as Fields;
  let at: Fields = copy;
  for (const key of path.slice(0, -1)) at = at[key] as Fields;
  const last = path.at(-1)!;
  if (to === DELETE) {
    if (Array.isArray(at)) at.splice(last as number, 1);
    else delete at[last];
  } else at[last] = to;
  return copy;
}

/** Every path to a value in `value` (objects and arrays walked), the root's fields first. */
function paths(value: unknown, prefix: (string | number)[] = []): (string | number)[][] {
  if (Buffer.isBuffer(value) || typeof value !== 'object' || value === null) return [];
  const entries: [string | number, unknown][] = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
  return entries.flatMap(([k, v]) => [[...prefix, k], ...paths(v, [...prefix, k])]);
}

const examplesOf = (type: string) => EXAMPLES.filter((m) => m.t === type).map((m) => ({ v: PROTOCOL_VERSION, ...m } as Fields));

t.test('each hot type has a check, and its examples pass it (the fast path is taken)', async (t) => {
  t.same([...FAST_CHECKED_TYPES].sort(), ['buildJob', 'buildResult', 'heartbeat', 'heartbeatAck', 'jobAccepted']);
  for (const type of FAST_CHECKED_TYPES) {
    const passing = examplesOf(type).filter((m) => certainlyValid(type, m));
    t.ok(passing.length > 0, `an example of ${type} passes the plain check`);
  }
  t.notOk(certainlyValid('evalBatch', { v: PROTOCOL_VERSION, t: 'evalBatch' }), 'other types always go to the schema');
});

t.test('whatever the plain checks pass, the schema passes: every probe at every field, extra and missing fields', async (t) => {
  let vouched = 0;
  let refused = 0;
  for (const type of FAST_CHECKED_TYPES) {
    for (const example of examplesOf(type)) {
      const variants: unknown[] = [{ ...example, extra: 1 }, { ...example, ['__proto__']: { polluted: true } }, { ...example, v: 1 }, { ...example, t: 'jobRefused' }];
      for (const path of paths(example)) {
        variants.push(mutate(example, path, DELETE));
        for (const probe of PROBES) variants.push(mutate(example, path, probe));
      }
      for (const variant of variants) {
        const fast = certainlyValid(type, variant as Fields);
        const schema = Message.safeParse(variant).success;
        if (fast && !schema) t.fail(`${type}: the plain check passed what the schema refuses: ${JSON.stringify(variant)}`);
        if (fast) vouched++;
        else if (!schema) refused++;
      }
    }
  }
  t.ok(vouched > 20, `the checks vouched for ${vouched} valid variants`);
  t.ok(refused > 500, `and left ${refused} invalid ones to the schema`);
});

t.test('a refused hot frame fails with the schema\'s own field and reason', async (t) => {
  const buildResult = examplesOf('buildResult')[0]!;
  const cases: [unknown, string, RegExp][] = [
    [mutate(buildResult, ['outputs', 0, 'narHash'], 'sha256:short'), 'buildResult.outputs.0.narHash', /expected sha256:<52 nix32 characters>/],
    [mutate(buildResult, ['outputs'], []), 'buildResult.outputs', /.+/],
    [mutate(buildResult, ['drvPath'], '/tmp/evil.drv'), 'buildResult.drvPath', /not in the store directory/],
    [mutate(buildResult, ['durationMs'], -1), 'buildResult.durationMs', /.+/],
    [{ ...buildResult, extra: true }, 'buildResult', /extra/],
    [mutate(examplesOf('jobAccepted')[0]!, ['jobId'], 'has space'), 'jobAccepted.jobId', /a job id is 1 to 128/],
    [mutate(examplesOf('heartbeat')[0]!, ['load', 'load1'], -1), 'heartbeat.load.load1', /.+/],
  ];
  for (const [frame, field, reason] of cases) {
    const decoded = decodeMessage(pack(frame));
    t.match(decoded, { ok: false, code: 'malformed_message', field, reason }, field);
  }
  t.throws(() => encodeMessage({ t: 'heartbeatAck', seq: 1.5 }), /invalid heartbeatAck message: seq/);
  t.throws(() => encodeMessage({ ...(examplesOf('buildJob')[0]! as object), t: 'buildJob', targetCaches: ['bad name'] } as never), /invalid buildJob message: targetCaches/);
});
