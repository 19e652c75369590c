// GET /projects/{org}/{project}/evaluations: a project's evaluations of every task, newest first,
// paged; the shape is protocol/api's ProjectEvaluationsPage; hidden from those who cannot see the project.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { ProjectEvaluationsPage } from '../../../../protocol/api/projectEvaluations.js';
import { signUp } from '../../../support/accounts.js';
import { createFlakeRepo } from '../../../support/flakeRepo.js';
import { startTestKiln } from '../../../support/kiln.js';

t.test('a project evaluations list pages newest first across tasks', async (t) => {
  const kiln = await startTestKiln(t);
  await signUp(kiln, 'root');
  const ada = await signUp(kiln, 'ada');
  const eve = await signUp(kiln, 'eve');
  const dir = await mkdtemp(join(tmpdir(), 'kiln-evals-list-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const repo = createFlakeRepo(join(dir, 'flake'), { 'flake.nix': '{ outputs = _: { }; }\n' });
  await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } });
  t.equal((await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'web', repository: repo.url } })).status, 200);
  t.equal((await kiln.api('PUT', '/tasks/web', { token: ada.token, body: { name: 'nightly' } })).status, 200);

  const ids: string[] = [];
  for (const path of ['/projects/acme/web/evaluate', '/tasks/web/nightly/evaluate', '/projects/acme/web/evaluate']) {
    const res = await kiln.api<string>('POST', path, { token: ada.token, body: path.startsWith('/tasks') ? {} : undefined });
    t.equal(res.status, 200, path);
    ids.push(res.message);
  }

  const first = await kiln.api('GET', '/projects/acme/web/evaluations?per_page=2', { token: ada.token });
  t.equal(first.status, 200);
  const page1 = ProjectEvaluationsPage.parse(first.message);
  t.match(page1, { page: 1, per_page: 2, total: 3 });
  t.same(page1.evaluations.map((e) => e.id), [ids[2], ids[1]], 'newest first');
  t.same(page1.evaluations.map((e) => e.task), ['default', 'nightly'], 'every task of the project');
  // No worker is connected: the scheduler may already have parked the evaluation as waiting.
  t.match(page1.evaluations[0], { phase: /^(queued|waiting)$/, commit: repo.commit, finished_at: null });

  const page2 = ProjectEvaluationsPage.parse((await kiln.api('GET', '/projects/acme/web/evaluations?page=2&per_page=2', { token: ada.token })).message);
  t.same(page2.evaluations.map((e) => e.id), [ids[0]], 'the rest on page 2');

  const defaults = ProjectEvaluationsPage.parse((await kiln.api('GET', '/projects/acme/web/evaluations', { token: ada.token })).message);
  t.match(defaults, { page: 1, per_page: 50, total: 3 });

  const tooMany = await kiln.api('GET', '/projects/acme/web/evaluations?per_page=500', { token: ada.token });
  t.equal(tooMany.status, 400, 'per_page is at most 200');
  t.match(tooMany.message, /per_page/);

  t.equal((await kiln.api('GET', '/projects/acme/web/evaluations', { token: eve.token })).status, 404, 'another tenant sees no such project');
});
