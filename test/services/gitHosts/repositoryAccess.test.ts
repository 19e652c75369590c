// The link of a project to the installation covering its private repository, and what an
// evaluation job gets for it (services/gitHosts/repositoryAccess.ts), against the loopback Git host
// with a real database: the clone base derived from the API URL, which URLs name a hosted
// repository, the .kiln-projects reading, the link cached for recheckMs on the clock, a suspended
// installation, and the clone address held to outbound.allowedNetworks and pinned for git.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import t from 'tap';
import { cloneBaseUrl, createHostApi, repositoryAccess } from '../../../services/gitHosts/index.js';
import { hostedFullName, linkFileNames } from '../../../services/gitHosts/repositoryAccess.js';
import { createOutboundClient } from '../../../storage/index.js';
import { testDatabase } from '../../support/db.js';
import { insertProject } from '../../support/modelRows.js';
import { steppedClock } from '../../support/clock.js';
import { createFlakeRepo } from '../../support/flakeRepo.js';
import { startTestGitHost } from '../../support/gitHost.js';
import { LOOPBACK_NETWORKS } from '../../support/kiln.js';

t.test('the clone base defaults from the API URL', async (t) => {
  t.equal(cloneBaseUrl('https://api.github.com', null), 'https://github.com');
  t.equal(cloneBaseUrl('https://ghe.example.com/api/v3', null), 'https://ghe.example.com');
  t.equal(cloneBaseUrl('https://git.example.com/forgejo/api/v1/', null), 'https://git.example.com/forgejo');
  t.equal(cloneBaseUrl('https://api.github.com', 'https://mirror.example.com/git/'), 'https://mirror.example.com/git', 'the option wins');
});

t.test('which repository URLs name a repository under the clone base', async (t) => {
  const base = 'https://github.com';
  t.equal(hostedFullName('https://github.com/Acme/App.git', base), 'acme/app');
  t.equal(hostedFullName('git@github.com:acme/app', base), 'acme/app', 'scp-like');
  t.equal(hostedFullName('ssh://git@github.com/acme/app/', base), 'acme/app');
  t.equal(hostedFullName('https://github.com.evil.example/acme/app', base), null, 'another host');
  t.equal(hostedFullName('https://evil.example/github.com/acme/app', base), null, 'the base as a path elsewhere');
  t.equal(hostedFullName('https://github.com/acme/app/tree/main', base), null, 'not owner/name');
  t.equal(hostedFullName('https://github.com/acme', base), null);
  t.equal(hostedFullName('file:///srv/acme/app', base), null);
  t.equal(hostedFullName('https://git.example.com/forgejo/acme/app.git', 'https://git.example.com/forgejo'), 'acme/app', 'a base with a path');
  t.equal(hostedFullName('https://git.example.com/acme/app.git', 'https://git.example.com/forgejo'), null);
});

t.test('.kiln-projects names a project on a line of its own', async (t) => {
  t.ok(linkFileNames('# comment\n  Acme/App  \n', 'acme', 'app'), 'letter case and spaces ignored');
  t.ok(linkFileNames('acme/app # the CI\r\n', 'acme', 'app'), 'a trailing comment, CRLF');
  t.notOk(linkFileNames('acme/app-two\nacme/ap\n# acme/app\n', 'acme', 'app'), 'a longer or shorter name, a commented line');
  t.notOk(linkFileNames('acme/app/x\n', 'acme', 'app'));
  t.notOk(linkFileNames('', 'acme', 'app'));
});

t.test('privateFetch', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-repo-access-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const host = await startTestGitHost(dir);
  t.teardown(() => host.close());
  const { sql } = await testDatabase(t);
  const repo = createFlakeRepo(join(dir, 'app'), { 'flake.nix': '{ outputs = _: {}; }', '.kiln-projects': 'acme/app\n' });
  host.hostRepository('acme/app', 31, repo.dir);
  await sql`insert into git_host_installations (id, account) values (5, 'acme')`;
  await sql`insert into git_host_repositories (installation_id, repository_id, full_name) values (5, 31, 'acme/app')`;
  const acme = await insertProject(sql, 'acme', 'app');
  const other = await insertProject(sql, 'mal', 'app');
  const clock = steppedClock(new Date('2026-11-26T12:00:00Z'));
  const outbound = createOutboundClient({ allowedNetworks: LOOPBACK_NETWORKS });
  t.teardown(() => outbound.close());
  const api = createHostApi({ apiUrl: host.url, appId: host.appId, privateKey: () => readFileSync(host.privateKeyFile, 'utf8'), outbound, userAgent: 'kiln-test' });
  const log = pino({ level: 'silent' });
  const access = repositoryAccess({ sql, api, outbound, cloneUrl: cloneBaseUrl(host.url, null), clock, log, recheckMs: 60_000 });
  const url = `${host.url}/acme/app.git`;
  const reads = () => host.calls.filter((c) => c.path.endsWith('/contents/.kiln-projects')).length;

  const found = await access.privateFetch(acme, url);
  t.equal(found?.repository, `${host.url}/acme/app.git`);
  t.equal(found?.access.resolve, null, 'an IP literal needs no pin');
  t.same(host.tokens.get(found!.access.token), { installation: 5, repositoryIds: [31], permissions: { contents: 'read' } });
  t.equal(await access.privateFetch(other, url), null, 'a project the file does not name');
  t.equal(await access.privateFetch(acme, 'https://github.com/acme/app'), null, 'another host: not this application\'s');
  const readsBefore = reads();
  t.ok(await access.privateFetch(acme, url), 'linked');
  t.equal(await access.privateFetch(other, url), null);
  t.equal(reads(), readsBefore, 'within recheckMs neither a link nor its absence is read again');
  clock.step(60_001);
  t.ok(await access.privateFetch(acme, url));
  t.equal(reads(), readsBefore + 1, 'after it, the link is read again');

  await sql`update git_host_installations set suspended = true where id = 5`;
  t.equal(await access.privateFetch(acme, url), null, 'a suspended installation gives no token');
  await sql`update git_host_installations set suspended = false where id = 5`;

  await t.test('the clone address is held to outbound.allowedNetworks and pinned', async (t) => {
    const names = new Map([['git.example.test', ['127.0.0.1']], ['inside.example.test', ['127.0.0.1', '10.1.2.3']]]);
    const at = (cloneUrl: string) => repositoryAccess({ sql, api, outbound, cloneUrl, clock, log, resolve: async (name) => names.get(name) ?? [] });
    const pinned = await at('http://git.example.test:8080').privateFetch(acme, 'http://git.example.test:8080/acme/app');
    t.equal(pinned?.access.resolve, 'git.example.test:8080:127.0.0.1', 'git connects only to the checked address');
    await t.rejects(at('https://inside.example.test').privateFetch(acme, 'https://inside.example.test/acme/app'), /inside\.example\.test is refused: .*outbound\.allowedNetworks/, 'one refused address refuses the name');
    await t.rejects(at('https://nowhere.example.test').privateFetch(acme, 'https://nowhere.example.test/acme/app'), /no address/);
  });
});
