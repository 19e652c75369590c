// The open_pr task action through /proto (docs/git-hosts.md "open_pr", docs/proto.md changeJob):
// an in-process worker with real git against the loopback Git host (`git http-backend` with
// receive-pack) takes a changeJob, fetches the commit with the read token, runs the command,
// force-pushes the branch with the write token and answers changeResult with the pushed commit;
// the server half then opens the pull request, and a second run updates the same one. Nothing
// changed answers pushed: null; a token that may not write fails the job and moves nothing.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Outgoing } from '../../protocol/index.js';
import { createHostApi } from '../../services/gitHosts/hostApi.js';
import { openOrUpdatePullRequest } from '../../services/gitHosts/pullRequests.js';
import { createOutboundClient } from '../../storage/index.js';
import { createFlakeRepo } from '../support/flakeRepo.js';
import { startTestGitHost } from '../support/gitHost.js';
import { startInProcessWorker } from '../support/inProcessWorker.js';
import { LOOPBACK_NETWORKS } from '../support/kiln.js';
import { requireNix, tempDir } from '../support/nixStore.js';

requireNix();
const INSTALLATION = 4242;
const REPOSITORY_ID = 9119;

t.test('changeJob: the worker pushes the change, the pull request is opened, then updated', async (t) => {
  const dir = tempDir('kiln-worker-change-');
  const host = await startTestGitHost(dir);
  t.teardown(() => host.close());
  const source = createFlakeRepo(join(dir, 'source'), { 'flake.nix': '{ outputs = _: { }; }\n', 'version': 'v1\n' });
  host.hostRepository('acme/app', REPOSITORY_ID, source.dir);
  const url = `${host.url}/acme/app.git`;
  const hostedGit = (...args: string[]) => execFileSync('git', ['-C', join(dir, 'hosted', 'acme/app.git'), ...args], { encoding: 'utf8' }).trim();
  const api = createHostApi({
    apiUrl: host.url, appId: host.appId, privateKey: () => readFileSync(host.privateKeyFile, 'utf8'),
    outbound: createOutboundClient({ allowedNetworks: LOOPBACK_NETWORKS }), userAgent: 'kiln-test',
  });
  const readToken = await api.repositoryReadToken(INSTALLATION, REPOSITORY_ID);
  const writeToken = await api.repositoryWriteToken(INSTALLATION, REPOSITORY_ID);

  const { session } = await startInProcessWorker(t, dir);
  const project = randomUUID();
  const job = (jobId: string, over: Partial<Outgoing<'changeJob'>> = {}): Outgoing<'changeJob'> => ({
    t: 'changeJob', jobId, project, repository: url, commit: source.commit, access: { token: readToken, resolve: null },
    command: ['sh', '-c', 'echo v2 > version'], pushTo: url, pushAccess: { token: writeToken, resolve: null },
    branch: 'kiln/default', author: { name: 'kiln bot', email: 'bot@kiln.invalid' }, message: 'Update version', ...over,
  });
  const change = { installationId: INSTALLATION, repository: 'acme/app', branch: 'kiln/default', base: 'main', title: 'Update version', body: 'made by kiln' };

  session.send(job('c1'));
  const first = await session.outcome('c1');
  t.match(first, { t: 'changeResult', pushed: /^[0-9a-f]{40}$/ }, first.t === 'jobFailed' ? first.failure.message : '');
  const pushed = first.t === 'changeResult' ? first.pushed : null;
  t.equal(host.branchHead('acme/app', 'kiln/default'), pushed, 'the branch is at the commit the worker answered');
  t.equal(hostedGit('log', '-1', '--format=%an <%ae>|%P', 'kiln/default'), `kiln bot <bot@kiln.invalid>|${source.commit}`, 'as the author, on the evaluated commit');
  t.equal(hostedGit('show', 'kiln/default:version'), 'v2');
  t.ok(host.gitRequests.some((r) => r.push && r.allowed && r.token === writeToken), 'pushed with the write token');
  t.match(await openOrUpdatePullRequest(api, change), { number: 1, created: true });

  session.send(job('c2', { command: ['sh', '-c', 'echo v3 > version'] }));
  const second = await session.outcome('c2');
  t.match(second, { t: 'changeResult', pushed: /^[0-9a-f]{40}$/ });
  t.equal(hostedGit('show', 'kiln/default:version'), 'v3');
  t.equal(hostedGit('rev-parse', 'kiln/default^'), source.commit, 'force-pushed: one commit on the branch');
  t.match(await openOrUpdatePullRequest(api, { ...change, title: 'Update version again' }), { number: 1, created: false });
  t.match(host.pullRequests, [{ number: 1, head: 'kiln/default', title: 'Update version again', state: 'open' }], 'one pull request, updated');

  session.send(job('c3', { command: ['true'] }));
  t.match(await session.outcome('c3'), { t: 'changeResult', pushed: null }, 'nothing changed: nothing pushed');

  session.send(job('c4', { pushAccess: { token: readToken, resolve: null }, command: ['sh', '-c', 'echo v9 > version'] }));
  t.match(await session.outcome('c4'), { t: 'jobFailed', failure: { reason: 'fetch_failed', message: /git push to .* failed/ } });
  t.equal(hostedGit('show', 'kiln/default:version'), 'v3', 'a token that may not write moved nothing');

  session.send(job('c5', { command: ['sh', '-c', 'echo broken >&2; exit 4'] }));
  t.match(await session.outcome('c5'), { t: 'jobFailed', failure: { reason: 'worker_error', message: /exit 4.*broken/s } });
});
