// NAR ingest and upstream fetch spans (docs/metrics.md, "Stage traces") on a real kiln with
// log.traceDir: a REST upload leaves `nar.ingest` with its `nar.store` and `nar.announce` stages
// below it, a trace of its own; a narinfo answered from an upstream cache leaves one
// `upstream.fetch` span naming the host and path, with the status the upstream answered. (A
// worker's push hangs below its build job's root: stageTraces.process.test.ts.)
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { startTestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { buildFixturePaths } from '../../support/nixStore.js';
import { uploadStorePath } from '../../support/restUpload.js';
import { eventually } from '../../support/eventually.js';

interface Span { trace_id: string; span_id: string; parent_span_id: string | null; name: string; status: string; attributes: Record<string, unknown> }

const spansIn = (dir: string): Span[] => readdirSync(dir).filter((f) => f.endsWith('.jsonl'))
  .flatMap((f) => readFileSync(join(dir, f), 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as Span));

t.test('ingest and upstream spans', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-ingest-traces-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const kiln = await startTestKiln(t, { 'log.traceDir': dir });
  const ada = await signUp(kiln, 'ada');
  const up = await kiln.api<{ public_key: string }>('PUT', '/caches', { token: ada.token, body: { name: 'up', public: true } });
  await kiln.api('PUT', '/caches', { token: ada.token, body: { name: 'down', public: true } });
  t.equal((await kiln.api('PUT', '/caches/down/upstreams', { token: ada.token, body: { url: `${kiln.url}/cache/up`, public_key: up.message.public_key } })).status, 200);
  const fx = buildFixturePaths();
  t.equal((await uploadStorePath(kiln.url, ada.token, 'up', fx.file)).status, 200);

  const ingest = await eventually(() => spansIn(dir).find((s) => s.name === 'nar.ingest'), { message: 'the ingest span is written' });
  t.match(ingest, { parent_span_id: null, status: 'ok', trace_id: /^[0-9a-f]{32}$/, attributes: { cache: 'up', store_path: fx.file, status: 'added' } });
  const stages = spansIn(dir).filter((s) => s.parent_span_id === ingest.span_id);
  t.same(stages.map((s) => s.name), ['nar.store', 'nar.announce'], 'its stages, in order');
  t.ok(stages.every((s) => s.trace_id === ingest.trace_id && s.status === 'ok'));
  t.match(stages[0]!.attributes, { status: 'added', file_size: Number });

  const hash = fx.file.slice('/nix/store/'.length, '/nix/store/'.length + 32);
  t.equal((await fetch(`${kiln.url}/cache/down/${hash}.narinfo`)).status, 200, 'answered from the upstream');
  const fetched = await eventually(() => spansIn(dir).find((s) => s.name === 'upstream.fetch'), { message: 'the upstream fetch span is written' });
  t.match(fetched, {
    parent_span_id: null, status: 'ok',
    attributes: { method: 'GET', host: new URL(kiln.url).host, path: `/cache/up/${hash}.narinfo`, kind: 'narinfo', status: 200 },
  });
  t.not(fetched.trace_id, ingest.trace_id, 'each its own trace');
});
