// Plain shape checks for the /proto frames a build farm sends by the thousand a second (a build's
// jobAccepted and buildResult, heartbeats and their acks, buildJob): the codec's zod schema costs
// more per frame than the rest of a dispatch (bench/README.md, dispatch). A check here only ever
// says "certainly valid"; anything it is unsure of (an unusual optional field, any violation) goes
// to the zod schema, which alone refuses frames, so a malformed frame fails with the same field and
// reason as before. What it accepts, the schema accepts too: test/protocol/proto/fastChecks.test.ts
// holds it to that on mutations of valid frames.
import { parseStorePath } from '../nix/storePath.js';
import { PROTOCOL_VERSION } from './limits.js';

type Fields = Record<string, unknown>;

const isPlain = (value: unknown): value is Fields =>
  typeof value === 'object' && value !== null && !Array.isArray(value) && Object.getPrototypeOf(value) === Object.prototype;

/** Own keys all among `required` and `optional`, every required one present. */
function keysAre(value: Fields, required: readonly string[], optional: readonly string[] = []): boolean {
  let present = 0;
  for (const key in value) {
    if (!Object.hasOwn(value, key)) return false;
    if (required.includes(key)) present++;
    else if (!optional.includes(key)) return false;
  }
  // a key JSON-like iteration skips (a symbol, a non-enumerable one) is not a frame msgpackr makes: leave it to the schema
  return present === required.length && Object.getOwnPropertyNames(value).length === Object.keys(value).length;
}

const int = (x: unknown, min = 0, max = Number.MAX_SAFE_INTEGER): boolean => Number.isSafeInteger(x) && (x as number) >= min && (x as number) <= max;
const num = (x: unknown, min: number, max: number): boolean => typeof x === 'number' && Number.isFinite(x) && x >= min && x <= max;
const intOrNull = (x: unknown): boolean => x === null || int(x);
const str = (x: unknown, min: number, max: number): x is string => typeof x === 'string' && x.length >= min && x.length <= max;
const matches = (x: unknown, pattern: RegExp): boolean => typeof x === 'string' && pattern.test(x);

// the same patterns as protocol/proto/fields.ts and jobMessages.ts
const JOB_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const CACHE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
const OUTPUT_NAME = /^[A-Za-z0-9+\-._?=]{1,100}$/;
const NAR_HASH = /^sha256:[0-9a-df-np-sv-z]{52}$/;
const SECONDS_MAX = 366 * 24 * 3600;

const storePath = (x: unknown): boolean => str(x, 0, 300) && parseStorePath(x).ok;
const drvPath = (x: unknown): boolean => storePath(x) && (x as string).endsWith('.drv');

function everyOf(x: unknown, max: number, check: (item: unknown) => boolean, min = 0): boolean {
  if (!Array.isArray(x) || x.length < min || x.length > max) return false;
  for (const item of x) if (!check(item)) return false;
  return true;
}

const envelope = (m: Fields, type: string): boolean => m['v'] === PROTOCOL_VERSION && m['t'] === type;

const RESOURCES = ['cpuUserSeconds', 'cpuSystemSeconds', 'peakMemoryBytes', 'ioReadBytes', 'ioWriteBytes', 'oomKills'];
const resources = (x: unknown): boolean => isPlain(x) && keysAre(x, RESOURCES)
  && num(x['cpuUserSeconds'], 0, 1e9) && num(x['cpuSystemSeconds'], 0, 1e9)
  && intOrNull(x['peakMemoryBytes']) && intOrNull(x['ioReadBytes']) && intOrNull(x['ioWriteBytes']) && intOrNull(x['oomKills']);

/** A built output whose CA is null (a content address goes to the schema's own check). */
const builtOutput = (x: unknown): boolean => isPlain(x) && keysAre(x, ['path', 'narHash', 'narSize', 'references', 'deriver', 'ca', 'name'])
  && storePath(x['path']) && matches(x['narHash'], NAR_HASH) && int(x['narSize']) && everyOf(x['references'], 100_000, storePath)
  && (x['deriver'] === null || drvPath(x['deriver'])) && x['ca'] === null && matches(x['name'], OUTPUT_NAME);

const LOAD = ['runningBuilds', 'runningEvals', 'load1', 'memoryFreeBytes', 'memoryTotalBytes', 'storeFreeBytes'];
const load = (x: unknown): boolean => isPlain(x) && keysAre(x, LOAD)
  && int(x['runningBuilds']) && int(x['runningEvals']) && num(x['load1'], 0, Number.MAX_VALUE)
  && int(x['memoryFreeBytes']) && int(x['memoryTotalBytes']) && intOrNull(x['storeFreeBytes']);

const substituter = (x: unknown): boolean => isPlain(x) && keysAre(x, ['url', 'publicKeys'], ['password'])
  && str(x['url'], 1, 2000) && everyOf(x['publicKeys'], 8, (k) => str(k, 0, 200))
  && (x['password'] === undefined || str(x['password'], 1, 2000));

const CHECKS: Record<string, (m: Fields) => boolean> = {
  jobAccepted: (m) => keysAre(m, ['v', 't', 'jobId']) && envelope(m, 'jobAccepted') && matches(m['jobId'], JOB_ID),
  buildResult: (m) => keysAre(m, ['v', 't', 'jobId', 'drvPath', 'outputs', 'alreadyValid', 'durationMs', 'logBytes', 'logDroppedBytes'], ['resources'])
    && envelope(m, 'buildResult') && matches(m['jobId'], JOB_ID) && drvPath(m['drvPath']) && everyOf(m['outputs'], 1000, builtOutput, 1)
    && typeof m['alreadyValid'] === 'boolean' && int(m['durationMs']) && int(m['logBytes']) && int(m['logDroppedBytes'])
    && (m['resources'] === undefined || resources(m['resources'])),
  // readings of running builds go to the schema
  heartbeat: (m) => keysAre(m, ['v', 't', 'seq', 'load'], ['builds']) && envelope(m, 'heartbeat') && int(m['seq']) && load(m['load'])
    && (m['builds'] === undefined || (Array.isArray(m['builds']) && m['builds'].length === 0)),
  heartbeatAck: (m) => keysAre(m, ['v', 't', 'seq']) && envelope(m, 'heartbeatAck') && int(m['seq']),
  buildJob: (m) => keysAre(m, ['v', 't', 'jobId', 'drvPath', 'substituters', 'targetCaches', 'timeoutSecs', 'maxSilentSecs'])
    && envelope(m, 'buildJob') && matches(m['jobId'], JOB_ID) && drvPath(m['drvPath']) && everyOf(m['substituters'], 16, substituter)
    && everyOf(m['targetCaches'], 64, (c) => matches(c, CACHE_NAME)) && int(m['timeoutSecs'], 0, SECONDS_MAX) && int(m['maxSilentSecs'], 0, SECONDS_MAX),
};

/** True only when `message` certainly matches its type's schema; false means "ask the schema", not "invalid". */
export function certainlyValid(type: string, message: Fields): boolean {
  const check = CHECKS[type];
  return check !== undefined && isPlain(message) && check(message);
}

/** The types with a check here (the tests mutate an example of each). */
export const FAST_CHECKED_TYPES: readonly string[] = Object.keys(CHECKS);
