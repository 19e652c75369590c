// Polling (docs/git-hosts.md, "Polling"): a project with poll_interval_secs has its repository's
// branch heads listed with git ls-remote; the first poll records them, a head that moved gets an
// evaluation of each task of that branch (trigger poll). The interval is checked against
// projects.minPollIntervalSecs. Real git on file:// repositories; no worker (evaluations stay queued).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { startTestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createFlakeRepo, shellFlake } from '../../support/flakeRepo.js';
import { eventually } from '../../support/eventually.js';
import { ProjectView } from '../../../protocol/api/projects.js';

const git = (dir: string, ...args: string[]) =>
  execFileSync('git', ['-C', dir, '-c', 'user.email=test@kiln.invalid', '-c', 'user.name=kiln test', ...args], { encoding: 'utf8' }).trim();

/** A new commit on `branch` (made from main if missing); returns its id. HEAD stays at main (the default branch the remote names). */
function commitTo(dir: string, branch: string): string {
  if (branch !== 'main') git(dir, 'checkout', '--quiet', ...(git(dir, 'branch', '--list', branch) === '' ? ['-b'] : []), branch);
  writeFileSync(join(dir, 'touched'), randomBytes(8).toString('hex'));
  git(dir, 'add', '.');
  git(dir, 'commit', '--quiet', '-m', `change on ${branch}`);
  const commit = git(dir, 'rev-parse', 'HEAD');
  git(dir, 'checkout', '--quiet', 'main');
  return commit;
}

t.test('polling', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-poll-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const kiln = await startTestKiln(t, { 'projects.minPollIntervalSecs': 1 });
  const repo = createFlakeRepo(join(dir, 'repo'), { 'flake.nix': shellFlake(randomBytes(8).toString('hex'), '      hello = mk "hello" "mkdir $out";') });
  const { token } = await signUp(kiln, 'ada');
  t.equal((await kiln.api('PUT', '/orgs', { token, body: { name: 'acme' } })).status, 200);
  const evaluations = (project: string) => kiln.sql<{ id: string; trigger: string; branch: string | null; commit: string; task: string }[]>`
    select e.id, e.trigger, e.branch, e.commit, t.name as task from evaluations e join tasks t on t.id = e.task_id join projects p on p.id = t.project_id
    where p.name = ${project} order by e.created_at`;
  const heads = async (project: string) => Object.fromEntries((await kiln.sql<{ branch: string; commit: string }[]>`
    select h.branch, h.commit from project_polled_heads h join projects p on p.id = h.project_id where p.name = ${project}`).map((r) => [r.branch, r.commit]));

  await t.test('poll_interval_secs is shown, checked against the instance minimum, and cleared with null', async (t) => {
    const below = await kiln.api('PUT', '/projects/acme', { token, body: { name: 'x', repository: repo.url, poll_interval_secs: 0 } });
    t.match(below, { status: 400, message: /poll_interval_secs/ });
    const made = await kiln.api('PUT', '/projects/acme', { token, body: { name: 'x', repository: repo.url } });
    t.equal(ProjectView.parse(made.message).poll_interval_secs, null, 'off by default');
    for (const bad of [-1, 1.5, '60', 86_401]) {
      t.equal((await kiln.api('PATCH', '/projects/acme/x', { token, body: { poll_interval_secs: bad } })).status, 400, String(bad));
    }
    t.equal(ProjectView.parse((await kiln.api('PATCH', '/projects/acme/x', { token, body: { poll_interval_secs: 30 } })).message).poll_interval_secs, 30);
    t.equal(ProjectView.parse((await kiln.api('PATCH', '/projects/acme/x', { token, body: { poll_interval_secs: null } })).message).poll_interval_secs, null);
    const [row] = await kiln.sql<{ next_poll_at: Date | null }[]>`select next_poll_at from projects where name = 'x'`;
    t.equal(row!.next_poll_at, null, 'not due any more');
    t.equal((await kiln.api('DELETE', '/projects/acme/x', { token })).status, 200);
  });

  await t.test('the first poll records the heads; a moved head is evaluated, for the tasks of that branch only', async (t) => {
    const made = await kiln.api('PUT', '/projects/acme', { token, body: { name: 'app', repository: repo.url, wildcard: 'packages.x86_64-linux.*', poll_interval_secs: 1 } });
    t.equal(made.status, 200, String(made.message));
    t.equal((await kiln.api('PUT', '/tasks/app', { token, body: { name: 'feat', branch: 'feature' } })).status, 200);
    await eventually(() => heads('app'), { until: (h) => h['main'] === repo.commit, timeout: 30_000, message: 'the first poll records the head of main' });
    t.same(await evaluations('app'), [], 'the first sighting starts nothing');

    const second = commitTo(repo.dir, 'main');
    const [evaluation] = await eventually(() => evaluations('app'), { until: (e) => e.length > 0, timeout: 30_000, message: 'the moved head is evaluated' });
    t.match(evaluation, { trigger: 'poll', branch: 'main', commit: second, task: 'default' });
    const view = (await kiln.api('GET', `/evals/${evaluation!.id}`, { token })).message;
    t.match(view, { trigger: 'poll', branch: 'main', pull_request: null, commit: second });

    // feature is new: recorded first, evaluated when it moves again
    const firstFeature = commitTo(repo.dir, 'feature');
    await eventually(() => heads('app'), { until: (h) => h['feature'] === firstFeature, timeout: 30_000, message: 'feature is recorded' });
    const secondFeature = commitTo(repo.dir, 'feature');
    const all = await eventually(() => evaluations('app'), { until: (e) => e.length > 1, timeout: 30_000, message: 'the feature task is evaluated' });
    t.equal(all.length, 2);
    t.match(all[1], { trigger: 'poll', branch: 'feature', commit: secondFeature, task: 'feat' });
    t.equal((await heads('app'))['main'], second, 'main did not move: nothing more for default');

    // main moves again while the evaluation of `second` is still open (no worker here): superseded
    const third = commitTo(repo.dir, 'main');
    const [, , latest] = await eventually(() => evaluations('app'), { until: (e) => e.length > 2, timeout: 30_000, message: 'the third head is evaluated' });
    t.match(latest, { trigger: 'poll', branch: 'main', commit: third });
    const [old] = await kiln.sql<{ phase: string; error: string }[]>`select phase, error from evaluations where id = ${evaluation!.id}`;
    t.match(old, { phase: 'aborted', error: `superseded by evaluation ${latest!.id} of commit ${third.slice(0, 12)}` }, 'the older poll evaluation of main is superseded');
    t.notMatch((await kiln.sql<{ phase: string }[]>`select phase from evaluations where id = ${all[1]!.id}`)[0]!.phase, 'aborted', 'feature\'s is not');
  });

  await t.test('a commit already evaluated (by a push, say) is not evaluated again; a repository gone is skipped, others go on', async (t) => {
    const other = createFlakeRepo(join(dir, 'other'), { 'flake.nix': shellFlake(randomBytes(8).toString('hex'), '      hello = mk "hello" "mkdir $out";') });
    t.equal((await kiln.api('PUT', '/projects/acme', { token, body: { name: 'gone', repository: `file://${join(dir, 'nowhere')}`, poll_interval_secs: 1 } })).status, 200);
    t.equal((await kiln.api('PUT', '/projects/acme', { token, body: { name: 'other', repository: other.url, poll_interval_secs: 1 } })).status, 200);
    await eventually(() => heads('other'), { until: (h) => h['main'] === other.commit, timeout: 30_000, message: 'recorded' });
    const next = commitTo(other.dir, 'main');
    // someone evaluates the new commit by hand first
    t.equal((await kiln.api('POST', '/projects/acme/other/evaluate', { token, body: { commit: next } })).status, 200);
    await eventually(() => heads('other'), { until: (h) => h['main'] === next, timeout: 30_000, message: 'the poll sees the move' });
    const listed = await evaluations('other');
    t.equal(listed.length, 1, 'only the manual one');
    t.equal(listed[0]!.trigger, 'manual');
    t.same(await heads('gone'), {}, 'an unreachable repository records nothing');
  });
});
