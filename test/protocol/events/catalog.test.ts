import t from 'tap';
import {
  Envelope,
  checkEventContent,
  compileEventGlobs,
  eventCatalog,
  eventDefinition,
  isDurable,
  renderEnvelope,
  signBody,
  splitEventGlobs,
  verifySignature,
} from '../../../protocol/index.js';

const id = '7f1c2a9e-3b4d-4c5e-8f60-718293a4b5c6';

t.test('the catalog holds every name the spec and the issue list', async (t) => {
  const names = new Set(eventCatalog().map((e) => e.name));
  const expected = [
    'build.queued', 'build.started', 'build.completed', 'build.failed', 'build.substituted', 'build.aborted',
    'evaluation.queued', 'evaluation.evaluating', 'evaluation.building', 'evaluation.completed', 'evaluation.failed',
    'evaluation.aborted', 'evaluation.approval_granted', 'evaluation.waiting',
    'project.create', 'task.star', 'task.action.update', 'cache.create', 'cache.update', 'cache.delete',
    'cache.nar.upload', 'cache.nar.delete', 'cache.member.create', 'cache.changed', 'cache.nar.fetched',
    'cache.narinfo.served', 'cache.nar.signed', 'gc.swept', 'gc.deep_finished', 'login.success', 'api_key.create',
    'session.revoke', 'build.status_changed', 'build.progress', 'evaluation.progress', 'evaluation.activity',
    'graph.recorded', 'graph.demoted', 'graph.collected', 'worker.connected', 'worker.job_dispatched',
    'worker.queue_depth', 'proto.client.*', 'proto.server.*', 'webhook.ping', 'stream.lagged',
  ];
  for (const name of expected) t.ok(names.has(name), `${name} is in the catalog`);
  const sorted = [...names];
  t.same(sorted, [...sorted].sort((a, b) => a.localeCompare(b)), 'sorted by name');
  const entry = eventCatalog().find((e) => e.name === 'build.queued')!;
  t.match(entry, { durable: true, durability: 'entry_points', audience: 'scope' });
  t.equal((entry.content as { type: string }).type, 'object', 'the content is described as JSON Schema');
  t.match(eventCatalog().find((e) => e.name === 'login.success'), { durable: true, audience: 'instance' });
  t.match(eventCatalog().find((e) => e.name === 'build.progress'), { durable: false, durability: 'never' });
});

t.test('durability is a rule on the event, not a flag per name', async (t) => {
  const build = { build_id: id, derivation_build: id, evaluation_id: id, status: 'queued', task: 'default', project: 'acme/web' };
  const queued = eventDefinition('build.queued')!;
  t.equal(isDurable(queued, { ...build, entry_point: true }), true, 'an entry point is durable');
  t.equal(isDurable(queued, { ...build, entry_point: false }), false, 'an inner derivation is not');
  t.equal(isDurable(eventDefinition('evaluation.queued')!, {}), true);
  t.equal(isDurable(eventDefinition('worker.connected')!, {}), false);
});

t.test('contents are checked against their schema, naming the field', async (t) => {
  t.match(checkEventContent('build.queued', { build_id: 'nope' }), { ok: false, field: 'content.build_id' });
  t.match(checkEventContent('no.such.event', {}), { ok: false, field: 'event', reason: /not in the event catalog/ });
  const ok = checkEventContent('cache.create', { cache: 'main', cache_id: id, extra: 'kept' });
  t.ok(ok.ok);
  if (ok.ok) t.equal(ok.value.content['extra'], 'kept', 'fields the catalog does not name are kept');
  t.match(checkEventContent('proto.client.build_log', { type: 'build_log', size: 10 }), { ok: true });
  t.match(checkEventContent('proto.server.job', { type: 'other', size: 10 }), { ok: false, field: 'content.type' });
  t.match(checkEventContent('proto.client.Bad-Name', { type: 'Bad-Name', size: 1 }), { ok: false, field: 'event' });
});

t.test('globs: * spans dots, ? one character, empty matches everything', async (t) => {
  const m = compileEventGlobs(['build.*', 'task.star', 'cache.nar.?pload']);
  t.ok(m('build.queued'));
  t.ok(m('build.status_changed'));
  t.ok(m('task.star'));
  t.notOk(m('task.stars'));
  t.ok(m('cache.nar.upload'));
  t.notOk(m('cache.create'));
  t.ok(compileEventGlobs([])('anything.at.all'));
  t.ok(compileEventGlobs(['cache.*'])('cache.nar.upload'));
  t.same(splitEventGlobs(' build.*, ,task.star'), ['build.*', 'task.star']);
});

t.test('the envelope: event, at in UTC with milliseconds, content', async (t) => {
  const text = renderEnvelope('cache.changed', Date.UTC(2026, 0, 2, 3, 4, 5, 6), { cache: 'main' });
  t.equal(text, '{"event":"cache.changed","at":"2026-01-02T03:04:05.006Z","content":{"cache":"main"}}');
  t.ok(Envelope.safeParse(JSON.parse(text)).success);
  t.notOk(Envelope.safeParse({ event: 'x', at: '2026-01-02T03:04:05Z', content: {} }).success, 'milliseconds are required');
});

t.test('signatures: sha256=<hex HMAC>, verified in constant time', async (t) => {
  const body = '{"event":"webhook.ping"}';
  const header = signBody('s3cret', body);
  t.match(header, /^sha256=[0-9a-f]{64}$/);
  t.ok(verifySignature('s3cret', body, header));
  t.ok(verifySignature('s3cret', Buffer.from(body), header), 'over the raw bytes');
  t.notOk(verifySignature('other', body, header), 'another secret');
  t.notOk(verifySignature('s3cret', `${body} `, header), 'another body');
  t.notOk(verifySignature('s3cret', body, header.slice(0, -1)), 'a shorter header (lengths differ: no timingSafeEqual throw)');
  t.notOk(verifySignature('s3cret', body, undefined));
});
