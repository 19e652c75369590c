// GET /evals/{id}/builds/page: an evaluation's builds a page at a time in drv_path order, filtered
// by status and by text in the name or attribute, with the counts per status; the shape is
// protocol/api's EvaluationBuildsPage; malformed paging is a 400 naming the field; hidden (404)
// from those who cannot see the project. Rows are seeded with SQL.
import t from 'tap';
import { EvaluationBuildsPage } from '../../../../protocol/api/evaluations.js';
import { signUp } from '../../../support/accounts.js';
import { startTestKiln } from '../../../support/kiln.js';
import { insertProject } from '../../../support/modelRows.js';

const STATUSES = ['completed', 'completed', 'failed', 'queued', 'substituted'] as const;

t.test('an evaluation builds list pages, filters and counts', async (t) => {
  const kiln = await startTestKiln(t);
  await signUp(kiln, 'root');
  const ada = await signUp(kiln, 'ada');
  const eve = await signUp(kiln, 'eve');
  t.equal((await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } })).status, 200);
  const projectId = await insertProject(kiln.sql, 'acme', 'web');
  const { sql } = kiln;
  const [task] = await sql<{ id: string }[]>`insert into tasks (project_id, name) values (${projectId}, 'default') returning id`;
  const [evaluation] = await sql<{ id: string }[]>`
    insert into evaluations (task_id, repository, wildcard, phase) values (${task!.id}, 'file:///x', '*', 'completed') returning id`;
  const evalId = evaluation!.id;
  // 25 builds pkg-00 … pkg-24 (drv_path order is name order); every fifth one failed, and so on;
  // pkg-07 has an attribute holding a LIKE wildcard character.
  const names = Array.from({ length: 25 }, (_, i) => `pkg-${String(i).padStart(2, '0')}`);
  const drvs = await sql<{ id: string; name: string }[]>`insert into derivations ${sql(names.map((name, i) => ({
    drv_path: `/nix/store/${String(i).padStart(32, '0')}-${name}.drv`, name, system: 'x86_64-linux', outputs: sql.json({ out: `/nix/store/${String(i).padStart(32, '1')}-${name}` }),
  })))} returning id, name`;
  for (const [i, d] of drvs.entries()) {
    const [db] = await sql<{ id: string }[]>`insert into derivation_builds (derivation_id, status, attempts) values (${d.id}, ${STATUSES[i % 5]!}, 1) returning id`;
    await sql`insert into builds (evaluation_id, derivation_build_id, entry_point, attr) values (${evalId}, ${db!.id}, ${d.name === 'pkg-07'}, ${d.name === 'pkg-07' ? 'packages.x86_64-linux.my_app%' : null})`;
  }
  const page = async (query: string, token = ada.token) => kiln.api('GET', `/evals/${evalId}/builds/page${query}`, { token });
  const parse = async (query: string) => {
    const res = await page(query);
    t.equal(res.status, 200, query);
    return EvaluationBuildsPage.parse(res.message);
  };

  const first = await parse('?per_page=10');
  t.match(first, { page: 1, per_page: 10, total: 25 });
  t.same(first.builds.map((b) => b.name), names.slice(0, 10), 'the first ten in drv_path order');
  t.same(first.counts, { total: 25, completed: 10, failed: 5, queued: 5, substituted: 5, started: 0, aborted: 0 }, 'counts of every status');
  t.same((await parse('?page=3&per_page=10')).builds.map((b) => b.name), names.slice(20), 'the last page holds the rest');
  t.same((await parse('?page=4&per_page=10')).builds, [], 'past the end: no builds, same total');
  t.match(await parse(''), { page: 1, per_page: 50, total: 25 }, 'defaults: page 1 of 50');
  const whole = (await kiln.api<unknown[]>('GET', `/evals/${evalId}/builds`, { token: ada.token })).message;
  t.same((await parse('?per_page=500')).builds, whole, 'the same views as the unpaged list');

  const failed = await parse('?status=failed&per_page=2');
  t.match(failed, { total: 5 });
  t.same(failed.builds.map((b) => b.name), ['pkg-02', 'pkg-07'], 'status filters before paging');
  t.same(failed.counts.total, 25, 'counts ignore the status filter');

  const searched = await parse('?search=PKG-1');
  t.same(searched.builds.map((b) => b.name), names.slice(10, 20), 'search is a case-insensitive substring of the name');
  t.same(searched.counts, { total: 10, completed: 4, failed: 2, queued: 2, substituted: 2, started: 0, aborted: 0 }, 'counts follow the search');
  t.same((await parse('?search=my_app%25')).builds.map((b) => b.name), ['pkg-07'], 'search matches the attribute');
  t.same((await parse('?search=my%25app')).builds, [], '% is taken literally, not as a wildcard');
  t.same((await parse('?search=pkg_0')).builds, [], '_ is taken literally');
  t.same((await parse('?search=%20%20')).total, 25, 'a blank search filters nothing');

  for (const [query, field] of [
    ['?page=0', 'page'], ['?page=abc', 'page'], ['?page=1.5', 'page'], ['?per_page=0', 'per_page'], ['?per_page=501', 'per_page'],
    ['?status=done', 'status'], [`?search=${'x'.repeat(201)}`, 'search'], ['?sort=name', 'sort'],
  ] as const) {
    const res = await page(query);
    t.equal(res.status, 400, `${query.slice(0, 20)} is refused`);
    t.match(String(res.message), field, `the refusal names ${field}`);
  }
  t.equal((await kiln.api('GET', '/evals/not-a-uuid/builds/page', { token: ada.token })).status, 400, 'a malformed id is a 400');
  t.equal((await page('', eve.token)).status, 404, 'another tenant sees no such evaluation');
  t.equal((await page('?page=0', eve.token)).status, 400, 'malformed paging is refused before the evaluation is looked up');
  t.equal((await kiln.api('GET', `/evals/${evalId}/builds/page`)).status, 401, 'no credential');
});
