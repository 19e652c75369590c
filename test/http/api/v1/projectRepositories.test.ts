// A hostile tenant's project repository: by default (projects.allowLocalRepositories off) it can
// name neither a repository on the server's disk (another tenant's clone) nor an internal
// address, on create, update, check-repository, evaluation or in the state file; and
// check-repository never turns into a port scanner.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { applyStateFile, readStateFile } from '../../../../services/index.js';
import { accessFixture } from '../../../support/accessFixture.js';
import { signUp } from '../../../support/accounts.js';
import { freePort, startTestKiln } from '../../../support/kiln.js';
import { writeStateFile } from '../../../support/stateFixture.js';

/** Another tenant's repository on the server's disk, with a commit to steal. */
function victimRepository(): { dir: string; head: string } {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-victim-'));
  const git = (...args: string[]) => execFileSync('git', ['-C', dir, '-c', 'user.email=v@v', '-c', 'user.name=v', ...args]).toString().trim();
  git('init', '-q', '-b', 'main');
  writeFileSync(join(dir, 'flake.nix'), '{ outputs = _: { secret = "victim"; }; }\n');
  git('add', 'flake.nix');
  git('commit', '-q', '-m', 'secret');
  return { dir, head: git('rev-parse', 'HEAD') };
}

t.test('by default local and private-address repositories are refused everywhere a URL is accepted', async (t) => {
  const kiln = await startTestKiln(t, { 'projects.allowLocalRepositories': false });
  await signUp(kiln, 'root');
  const mallory = await signUp(kiln, 'mallory');
  await kiln.api('PUT', '/orgs', { token: mallory.token, body: { name: 'evil' } });
  const victim = victimRepository();

  for (const repository of [`file://${victim.dir}`, victim.dir, `http://127.0.0.1:${kiln.port}/x.git`, 'http://[::ffff:127.0.0.1]:5432/x', 'ssh://git@10.0.0.1/x', 'git@0x7f.1:x']) {
    const res = await kiln.api('PUT', '/projects/evil', { token: mallory.token, body: { name: 'steal', repository } });
    t.equal(res.status, 422, `create: ${repository}`);
    t.equal(res.code, 'repository_not_allowed');
    t.match(res.message, /projects\.allowLocalRepositories/, 'the message names the option');
  }
  t.same(await kiln.sql`select 1 from projects where name = 'steal'`, [], 'nothing was written');

  const created = await kiln.api<{ id: string }>('PUT', '/projects/evil', { token: mallory.token, body: { name: 'web', repository: 'https://git.example/evil/web.git' } });
  t.equal(created.status, 200, 'a remote host is accepted');
  const patched = await kiln.api('PATCH', '/projects/evil/web', { token: mallory.token, body: { repository: `file://${victim.dir}` } });
  t.match(patched, { status: 422, code: 'repository_not_allowed' }, 'update');
  const [row] = await kiln.sql<{ repository: string }[]>`select repository from projects where id = ${created.message.id}`;
  t.equal(row!.repository, 'https://git.example/evil/web.git', 'the repository did not change');

  // A row saved while the option was on (or by an older version) is checked again where it is used.
  await kiln.sql`update projects set repository = ${`file://${victim.dir}`} where id = ${created.message.id}`;
  const check = await kiln.api<{ ok: boolean; refs?: unknown }>('POST', '/projects/evil/web/check-repository', { token: mallory.token });
  t.match(check, { status: 422, code: 'repository_not_allowed' }, 'check-repository lists no refs of the victim');
  t.notMatch(JSON.stringify(check.message), victim.head);
  const evaluate = await kiln.api('POST', '/projects/evil/web/evaluate', { token: mallory.token });
  t.match(evaluate, { status: 422, code: 'repository_not_allowed' }, 'evaluate at the head');
  const atCommit = await kiln.api('POST', `/tasks/${created.message.id}/default/evaluate`, { token: mallory.token, body: { commit: victim.head } });
  t.match(atCommit, { status: 422, code: 'repository_not_allowed' }, 'evaluate at a given commit');
  t.same(await kiln.sql`select 1 from evaluations`, [], 'no evaluation reaches a worker');
});

t.test('the state file follows the same rule', async (t) => {
  const f = await accessFixture(t, { 'projects.allowLocalRepositories': false });
  const { file } = writeStateFile({ organizations: [{ name: 'acme' }], projects: [{ organization: 'acme', name: 'web', repository: 'file:///srv/other' }] });
  await t.rejects(applyStateFile(f.deps, readStateFile(file)), /project acme\/web: .*projects\.allowLocalRepositories/);
  t.same(await f.sql`select 1 from organizations`, [], 'nothing of the file was applied');
  const allowed = await accessFixture(t, { 'projects.allowLocalRepositories': true });
  t.match(await applyStateFile(allowed.deps, readStateFile(file)), { projects: 1 }, 'with the option on it applies');
});

t.test('check-repository answers only "unreachable", whatever git said', async (t) => {
  // With local repositories allowed (a single-tenant instance), the check still tells an open port from a closed one by nothing.
  const kiln = await startTestKiln(t, { 'projects.allowLocalRepositories': true });
  const ada = await signUp(kiln, 'ada');
  await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } });
  const listener = createServer((socket) => socket.end('SSH-2.0-not-git\r\n'));
  await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
  t.teardown(() => listener.close());
  const open = (listener.address() as { port: number }).port;
  const closed = await freePort();
  const answers: unknown[] = [];
  for (const [name, repository] of [
    ['closed', `http://127.0.0.1:${closed}/x.git`], ['open, not git', `http://127.0.0.1:${open}/x.git`], ['kiln itself', `http://127.0.0.1:${kiln.port}/x.git`],
    ['no such path', 'file:///nonexistent/repo'], ['ssh to an open port', `ssh://git@127.0.0.1:${open}/x`],
  ] as const) {
    await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: `p-${answers.length}`, repository } });
    const res = await kiln.api('POST', `/projects/acme/p-${answers.length}/check-repository`, { token: ada.token });
    t.equal(res.status, 200, name);
    answers.push(res.message);
  }
  t.same(answers, answers.map(() => ({ ok: false, reason: 'unreachable' })), 'every failure reads the same');
});
