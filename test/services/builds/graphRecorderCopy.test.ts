// The recording path by COPY (issue 23 item 2): COPY rows in PostgreSQL's text format carry any
// text whole (a tab, newline, backslash or quote cannot end a field, a row or an array element
// early), and an evaluation's batches recorded through the staging tables give the same rows as
// the message said: derivations with their fields, edges by id, one build each, a derivation
// shared with an earlier evaluation written once, attributes and errors.
import t from 'tap';
import type { DerivationNode } from '../../../protocol/index.js';
import { recordEvalBatch, stageEvalBatch } from '../../../services/builds/graphRecorder.js';
import { arrayLiteral, copyInto, copyRow } from '../../../storage/index.js';
import { testDatabase } from '../../support/db.js';
import { derivationNode } from '../../support/derivationNodes.js';
import { evalBatch, recordingFixture } from '../../support/recordingFixture.js';

const HOSTILE = ['tab\there', 'new\nline', 'carriage\rreturn', 'back\\slash', '\\N', 'quote"d', '{braces,comma}', 'NULL', '', 'ünïcødé ✓', '\\.'];

t.test('COPY text rows carry any text whole', async (t) => {
  const { sql } = await testDatabase(t);
  await sql`create table copied (n int, s text, a text[], j jsonb, b boolean)`;
  await sql.begin(async (tx) => {
    await copyInto(tx, 'copied', ['n', 's', 'a', 'j', 'b'], HOSTILE.map((s, n) => copyRow([n, s, arrayLiteral([s, 'x', s]), JSON.stringify({ s }), n % 2 === 0])).join('')
      + copyRow([99, null, arrayLiteral([]), 'null', false]));
  });
  const rows = await sql<{ n: number; s: string | null; a: string[]; j: { s: string } | null; b: boolean }[]>`select n, s, a, j, b from copied order by n`;
  t.same(rows.slice(0, HOSTILE.length), HOSTILE.map((s, n) => ({ n, s, a: [s, 'x', s], j: { s }, b: n % 2 === 0 })), 'every field as written');
  t.same(rows.at(-1), { n: 99, s: null, a: [], j: null, b: false }, 'null and the empty array');
  t.throws(() => copyRow(['nul\0byte']), /NUL/, 'NUL, which PostgreSQL text cannot hold, is refused by name');
  // a row the server refuses (a missing column) fails the COPY instead of leaving it waiting
  await t.rejects(sql.begin((tx) => copyInto(tx, 'copied', ['n', 's'], '1\n')), /transaction is aborted|missing data/);
  // the statements after a COPY go out behind its end: they see its rows, their answer is the COPY's,
  // and a refused COPY still fails (its follower runs in the aborted transaction)
  const after = await sql.begin((tx) => copyInto(tx, 'copied', ['n'], '100\n101\n', () => tx<{ n: number }[]>`select count(*)::int as n from copied where n >= 100`));
  t.same(after, [{ n: 2 }], 'the following statement sees the rows and answers for the COPY');
  await t.rejects(sql.begin((tx) => copyInto(tx, 'copied', ['n', 's'], '1\n', () => tx`select 1`)), /transaction is aborted|missing data/);
  t.same(await sql`select count(*)::int as n from copied where n >= 100`, [{ n: 2 }]);
});

t.test('an evaluation recorded through the staging tables', async (t) => {
  const { db, events, evaluation } = await recordingFixture(t);
  const batch = evalBatch;

  const lib = derivationNode('lib');
  const plain = derivationNode('odd');
  const odd: { drvPath: string; out: string; derivation: DerivationNode } = {
    ...plain,
    derivation: {
      ...plain.derivation, name: 'tab\tnew\nline back\\slash "quoted" {x,y} \\N', inputSrcs: ['/nix/store/00000000000000000000000000000000-src'],
      requiredSystemFeatures: ['kvm', 'big-parallel'], timeoutSecs: 30, preferLocalBuild: true,
    },
  };
  const app = derivationNode('app', [lib.drvPath, odd.drvPath]);
  const first = await evaluation();
  // a batch held as staged rows, as the server holds it while earlier batches are recorded
  const staged = stageEvalBatch(batch(first, { derivations: [lib.derivation, odd.derivation] }));
  t.equal((await recordEvalBatch(events, first, staged)).derivations, 2);
  await recordEvalBatch(events, first, batch(first, {
    derivations: [app.derivation],
    attributes: [{ path: ['packages', 'x86_64-linux', 'app'], drvPath: app.drvPath, outputs: { out: app.out } }],
    errors: [{ path: ['packages', 'x86_64-linux', 'broken'], message: 'error:\tbad\nthing' }],
  }));

  const [row] = await db.sql<{ name: string; input_srcs: string[]; required_features: string[]; timeout_secs: number; prefer_local_build: boolean; outputs: unknown }[]>`
    select name, input_srcs, required_features, timeout_secs, prefer_local_build, outputs from derivations where drv_path = ${odd.drvPath}`;
  t.same(row, {
    name: odd.derivation.name, input_srcs: odd.derivation.inputSrcs, required_features: ['kvm', 'big-parallel'], timeout_secs: 30, prefer_local_build: true,
    outputs: { out: odd.out },
  }, 'the derivation\'s fields, hostile text whole');
  const edges = await db.sql<{ path: string }[]>`
    select i.drv_path as path from derivation_edges x join derivations d on d.id = x.derivation_id join derivations i on i.id = x.depends_on
    where d.drv_path = ${app.drvPath} order by 1`;
  t.same(edges.map((e) => e.path), [lib.drvPath, odd.drvPath].sort(), 'the edges, to inputs of an earlier batch');
  const builds = await db.sql<{ drv_path: string; entry_point: boolean; attr: string | null; inputs_remaining: number }[]>`
    select d.drv_path, b.entry_point, b.attr, db.inputs_remaining from builds b join derivation_builds db on db.id = b.derivation_build_id
    join derivations d on d.id = db.derivation_id where b.evaluation_id = ${first} order by d.name`;
  t.same(builds.map((b) => [b.drv_path, b.entry_point, b.attr, b.inputs_remaining]).sort(), [
    [app.drvPath, true, 'packages.x86_64-linux.app', 2], [lib.drvPath, false, null, 0], [odd.drvPath, false, null, 0],
  ].sort(), 'one build each, the entry point named, readiness counted');
  const [error] = await db.sql<{ attr: string; message: string }[]>`select attr, message from evaluation_attribute_errors where evaluation_id = ${first}`;
  t.same(error, { attr: 'packages.x86_64-linux.broken', message: 'error:\tbad\nthing' });

  // A second evaluation reaching the same graph adds builds rows only, in a batch that names one derivation twice.
  const second = await evaluation();
  await recordEvalBatch(events, second, batch(second, { derivations: [lib.derivation, odd.derivation, app.derivation, lib.derivation] }));
  const [counts] = await db.sql<{ derivations: number; edges: number; shared: number; builds: number }[]>`
    select (select count(*)::int from derivations) as derivations, (select count(*)::int from derivation_edges) as edges,
           (select count(*)::int from derivation_builds) as shared, (select count(*)::int from builds where evaluation_id = ${second}) as builds`;
  t.same(counts, { derivations: 3, edges: 2, shared: 3, builds: 3 }, 'shared rows written once');

  // A derivation new to its batch and listed twice in it: its edges are COPYed once (a second copy
  // of an edge would be refused by the primary key and fail the batch).
  const tool = derivationNode('tool', [lib.drvPath, app.drvPath]);
  await recordEvalBatch(events, second, batch(second, { derivations: [tool.derivation, tool.derivation] }));
  const toolRows = await db.sql<{ edges: number; shared: number; builds: number; inputs_remaining: number }[]>`
    select (select count(*)::int from derivation_edges where derivation_id = d.id) as edges,
           (select count(*)::int from derivation_builds where derivation_id = d.id) as shared,
           (select count(*)::int from builds b join derivation_builds x on x.id = b.derivation_build_id where x.derivation_id = d.id and b.evaluation_id = ${second}) as builds,
           (select inputs_remaining from derivation_builds where derivation_id = d.id) as inputs_remaining
    from derivations d where d.drv_path = ${tool.drvPath}`;
  t.same(toolRows, [{ edges: 2, shared: 1, builds: 1, inputs_remaining: 2 }], 'a derivation listed twice: its edges once, one build');

  // A batch PostgreSQL refuses after its derivations, edges and builds went in (an error message
  // with NUL reaches the last statement) leaves none of them.
  const refused = derivationNode('refused', [lib.drvPath, tool.drvPath]);
  await t.rejects(recordEvalBatch(events, second, batch(second, {
    derivations: [refused.derivation],
    errors: [{ path: ['packages', 'x86_64-linux', 'nul'], message: 'bad\0byte' }],
  })));
  const [left] = await db.sql<{ derivations: number; edges: number; shared: number; builds: number }[]>`
    select (select count(*)::int from derivations) as derivations, (select count(*)::int from derivation_edges) as edges,
           (select count(*)::int from derivation_builds) as shared, (select count(*)::int from builds where evaluation_id = ${second}) as builds`;
  t.same(left, { derivations: 4, edges: 4, shared: 4, builds: 4 }, 'a refused batch leaves nothing half-written');

  const nul = derivationNode('nul');
  t.throws(() => stageEvalBatch(batch(second, { derivations: [{ ...nul.derivation, name: 'a\0b' }] })), /NUL/, 'a name with NUL cannot be staged');
});
