// The build events' plain checks (protocol/events/fastEventChecks.ts) vouch only for contents the
// catalog's schema accepts, and return what the schema returns: every mutation of a valid content
// they pass, the schema passes too, with the same rendered text; the contents a dispatch emits
// take the plain way.
import t from 'tap';
import { eventDefinition } from '../../../protocol/events/catalog.js';
import { certainEventContent } from '../../../protocol/events/fastEventChecks.js';

type Fields = Record<string, unknown>;
const ID = '0b0e2f6c-3f5e-4c7a-9a57-1e2d3c4b5a69';
const identity = { build_id: ID, derivation_build: '1c1e2f6c-3f5e-4c7a-9a57-1e2d3c4b5a60', evaluation_id: ID, status: 'started', task: 'default', project: 'acme/app' };
const EXAMPLES: [string, Fields][] = [
  ['build.started', { ...identity, entry_point: true, drv_path: '/nix/store/lsfjb3hgbdh1w7s3jmdq7a1sk1x41vpg-app.drv', attempt: 1, attr: 'packages.x86_64-linux.app', worker: ID }],
  ['build.failed', { ...identity, status: 'failed', entry_point: false, drv_path: '/nix/store/x.drv', attempt: 2, failure: 'FailedTransient' }],
  ['build.status_changed', { ...identity, previous: 'queued', entry_point: false, worker: ID }],
  ['build.status_changed', { ...identity, previous: null }],
  // the emitter's key order need not be the schema's
  ['build.completed', { attempt: 0, drv_path: '/nix/store/y.drv', entry_point: false, ...identity, status: 'completed' }],
  ['worker.job_dispatched', { worker: ID, job_id: ID, kind: 'build', build_id: ID }],
  ['worker.job_dispatched', { build_id: ID, kind: 'build', job_id: ID, worker: ID }],
  ['worker.job_dispatched', { worker: ID, job_id: ID, kind: 'evaluation', evaluation_id: ID }],
];
const PROBES: unknown[] = [
  undefined, null, true, false, 0, -1, 1.5, 2 ** 53, '', 'x', 'ab', 'a'.repeat(64), 'a'.repeat(128), 'a'.repeat(401), 'a'.repeat(1001),
  'queued', 'bogus', 'FailedPermanent', 'build', 'evaluation', 'Build', ID.toUpperCase(), `${ID}x`, '0b0e2f6c-3f5e-0c7a-9a57-1e2d3c4b5a69', '0b0e2f6c-3f5e-9c7a-9a57-1e2d3c4b5a69', '0b0e2f6c-3f5e-4c7a-ca57-1e2d3c4b5a69', '0b0e2f6c-3f5e-4c7a-7a57-1e2d3c4b5a69', '0b0e2f6c_3f5e-4c7a-9a57-1e2d3c4b5a69', '0b0e2f6c-3f5e-4c7a-9a57-1e2d3c4b5a6g', 'ffffffff-ffff-ffff-ffff-ffffffffffff', [], {}, new Date(0),
];
const KEYS = ['build_id', 'derivation_build', 'evaluation_id', 'status', 'task', 'project', 'entry_point', 'attr', 'drv_path', 'failure', 'attempt', 'worker', 'previous', 'job_id', 'kind', 'other'];

const schemaOf = (name: string) => eventDefinition(name)!.content;

t.test('the contents a dispatch emits take the plain way, with the schema\'s result', async (t) => {
  for (const [name, content] of EXAMPLES) {
    const fast = certainEventContent(name, content);
    t.ok(fast, `${name} is certainly valid`);
    const parsed = schemaOf(name).safeParse(content);
    t.ok(parsed.success);
    t.equal(JSON.stringify(fast), JSON.stringify(parsed.data), `${name}: the same text as the schema's`);
  }
});

t.test('what the plain check passes, the schema passes, with the same text', async (t) => {
  let vouched = 0;
  let mutations = 0;
  for (const [name, content] of EXAMPLES) {
    for (const key of KEYS) {
      for (const to of [...PROBES, 'delete']) {
        const copy: Fields = { ...content };
        if (to === 'delete') delete copy[key];
        else copy[key] = to;
        mutations++;
        const fast = certainEventContent(name, copy);
        if (fast === null) continue;
        vouched++;
        const parsed = schemaOf(name).safeParse(copy);
        if (!parsed.success || JSON.stringify(fast) !== JSON.stringify(parsed.data)) t.fail(`${name} with ${key} = ${String(to)}: the plain check vouched for what the schema says otherwise`);
      }
    }
  }
  t.ok(vouched > 50 && vouched < mutations, `vouched for ${vouched} of ${mutations} mutations`);
});

t.test('other events and odd objects go to the schema', async (t) => {
  t.equal(certainEventContent('evaluation.building', { evaluation_id: ID, project: 'acme/app', task: 'default', phase: 'building' }), null);
  t.equal(certainEventContent('build.bogus', { ...identity, entry_point: true }), null);
  t.equal(certainEventContent('build.started', Object.assign(Object.create({ inherited: 1 }) as Fields, identity, { entry_point: true })), null);
  // a symbol key is no JSON field: neither keeps it
  const withSymbol = { ...identity, entry_point: true, [Symbol('s')]: 1 };
  t.same(certainEventContent('build.started', withSymbol), schemaOf('build.started').parse(withSymbol));
  t.equal(certainEventContent('build.started', { ...identity, entry_point: true, attr: undefined }), null);
  t.equal(certainEventContent('build.started', null), null);
});
