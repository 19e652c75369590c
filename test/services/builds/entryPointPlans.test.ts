// An evaluation's entry points are found by index with both keys of builds' (evaluation_id,
// derivation_build_id) whatever the statistics (services/builds/entryPoints.ts): when the graph
// is recorded again by an evaluation the last analyze did not see (the statistics estimate its
// builds at one row), marking N entry points reads about N index entries of builds, not N times
// the evaluation's builds. Counted by PostgreSQL's own per-transaction statistics, so the rule
// is checked without timing; the rows marked are the same as the first evaluation's.
import t from 'tap';
import { recordEvalBatch } from '../../../services/builds/graphRecorder.js';
import { markEntryPoints } from '../../../services/builds/entryPoints.js';
import { derivationNode } from '../../support/derivationNodes.js';
import { evalBatch, recordingFixture } from '../../support/recordingFixture.js';

const DERIVATIONS = 600;
const ATTRIBUTES = 300;

t.test('entry points of a graph recorded again are probed by both keys, whatever the statistics', async (t) => {
  const { db, events, evaluation } = await recordingFixture(t);
  const batch = evalBatch;
  const nodes = Array.from({ length: DERIVATIONS }, (_, i) => derivationNode(`pkg-${i}`));
  const attributes = nodes.slice(0, ATTRIBUTES).map((n, i) => ({ path: ['packages', 'x86_64-linux', `pkg-${i}`], drvPath: n.drvPath, outputs: { out: n.out } }));

  const first = await evaluation();
  await recordEvalBatch(events, first, batch(first, { derivations: nodes.map((n) => n.derivation) }));
  await recordEvalBatch(events, first, batch(first, { attributes }));
  // the statistics know the first evaluation only: every builds row is its
  await db.sql`analyze builds, derivation_builds, derivations`;

  const second = await evaluation();
  await recordEvalBatch(events, second, batch(second, { derivations: nodes.map((n) => n.derivation) }));
  const ids = new Map((await db.sql<{ id: string; drv_path: string }[]>`select id, drv_path from derivations`).map((r) => [r.drv_path, r.id]));
  const attrs = attributes.map((a) => [ids.get(a.drvPath)!, a.path.join('.')] as const);
  // this transaction's index reads of builds (pending statistics of this backend, not yet flushed)
  const read = await db.sql.begin(async (tx) => {
    const builds = () => tx<{ n: string }[]>`select sum(pg_stat_get_xact_tuples_returned(indexrelid))::text as n from pg_index where indrelid = 'builds'::regclass`;
    const before = Number((await builds())[0]!.n);
    await markEntryPoints(tx, second, attrs);
    return Number((await builds())[0]!.n) - before;
  });
  t.ok(read <= 3 * ATTRIBUTES, `builds index entries read: ${read} for ${ATTRIBUTES} entry points among ${DERIVATIONS} builds (one probe each, and the update's ids)`);

  const marked = (evaluationId: string) => db.sql<{ drv_path: string; attr: string }[]>`
    select d.drv_path, b.attr from builds b join derivation_builds x on x.id = b.derivation_build_id join derivations d on d.id = x.derivation_id
    where b.evaluation_id = ${evaluationId} and b.entry_point order by d.drv_path`;
  const [a, b] = [await marked(first), await marked(second)];
  t.equal(b.length, ATTRIBUTES, 'every entry point marked');
  t.same(b, a, 'the same rows and attribute paths as the first evaluation\'s');
});
