// projects.allowLocalRepositories off (the default): no local repository, no internal address,
// however spelled or however a name resolves; git is then held to what was checked.
import { hostname } from 'node:os';
import t, { type Test } from 'tap';
import { ApiError } from '../../../protocol/index.js';
import { gitConfigArgs, gitEnvironment, systemHostLookup, vetRepository, type HostLookup } from '../../../services/projects/repositoryPolicy.js';
import { createServer, type AddressInfo } from 'node:net';
import { execFile } from 'node:child_process';

/** A resolver with fixed answers: the names below stand for a tenant's own DNS records. */
const zone: Record<string, string[]> = {
  'public.example': ['140.82.112.3'],
  'rebind.example': ['140.82.112.3', '127.0.0.1'],
  'internal.example': ['10.0.0.7'],
  'metadata.example': ['169.254.169.254'],
  'v6.example': ['::1'],
  'mapped.example': ['::ffff:192.168.0.1'],
};
const lookup: HostLookup = async (host) => zone[host] ?? [];
const strict = { allowLocal: false, lookup };

async function refusal(t: Test, url: string): Promise<ApiError | undefined> {
  try {
    await vetRepository(url, strict);
  } catch (e) {
    if (e instanceof ApiError) return e;
    throw e;
  }
  t.fail(`${url} was accepted`);
  return undefined;
}

t.test('local paths and file:// URLs are refused with 422, naming the option', async (t) => {
  for (const url of ['file:///srv/other-tenant', '/var/lib/kiln-worker/repos/0123', './repo', 'repo', 'file://localhost/etc']) {
    const e = await refusal(t, url);
    t.match(e, { status: 422, code: 'repository_not_allowed', message: /projects\.allowLocalRepositories/ }, url);
  }
});

t.test('loopback, private and link-local hosts are refused in every spelling', async (t) => {
  for (const url of [
    'http://127.0.0.1:5432/x', 'http://2130706433/x', 'http://0x7f.1/x', 'http://017700000001/x', 'http://0/x', 'https://[::1]/x',
    'https://[::ffff:127.0.0.1]/x', 'ssh://git@10.0.0.1/x', 'git://192.168.1.1/x', 'http://169.254.169.254/latest', 'git@[fe80::1]:x',
    '[git@127.0.0.1:22]:x', 'git@127.1:x', 'http://localhost/x', 'http://LOCALHOST./x', 'https://db.localhost/x', 'http://%31%32%37.0.0.1/x',
    'ftp://[::]/x',
  ]) {
    const e = await refusal(t, url);
    t.match(e, { status: 422, code: 'repository_not_allowed', message: /projects\.allowLocalRepositories/ }, url);
  }
});

t.test('a name resolving to a private address is private, even one of several', async (t) => {
  for (const host of ['rebind.example', 'internal.example', 'metadata.example', 'v6.example', 'mapped.example']) {
    const e = await refusal(t, `https://${host}/repo.git`);
    t.match(e?.message, /resolves to a loopback, private or reserved address/, host);
  }
  const e = await refusal(t, 'git@internal.example:repo.git');
  t.match(e?.code, 'repository_not_allowed', 'scp-like too');
});

t.test('the system resolver is asked too: this machine by its own name', async (t) => {
  // The name check knows only localhost; the machine's own name resolves (/etc/hosts) to a loopback or private address.
  const name = hostname();
  t.ok((await systemHostLookup(name)).length > 0, `${name} resolves here`);
  const e = await vetRepository(`https://${name}/x`, { allowLocal: false }).catch((err: unknown) => err);
  t.match(e, { status: 422, code: 'repository_not_allowed', message: /resolves to a loopback, private or reserved address/ });
});

t.test('public hosts pass, and git is pinned to the addresses checked with no redirects and only network transports', async (t) => {
  const options = await vetRepository('https://public.example/acme/web.git', strict);
  t.ok(options.includes('protocol.allow=never'), 'other transports (file, ext) are off');
  t.ok(options.includes('protocol.https.allow=always'));
  t.notOk(options.some((o) => o.startsWith('protocol.file')), 'file:// stays off');
  t.ok(options.includes('http.followRedirects=false'), 'a redirect cannot lead to an internal address');
  t.ok(options.includes('http.curloptResolve=public.example:443:140.82.112.3'), 'curl uses the checked address, not a second DNS answer');
  t.same((await vetRepository('http://public.example:8080/x', strict)).filter((o) => o.startsWith('http.curloptResolve')), ['http.curloptResolve=public.example:8080:140.82.112.3']);
  t.ok(await vetRepository('https://140.82.112.3/x', strict), 'a public address literal');
  t.ok(await vetRepository('git@github.example:acme/web.git', strict), 'a name that does not resolve reaches nothing: accepted');
});

t.test('projects.allowLocalRepositories lets local and private repositories through', async (t) => {
  for (const url of ['file:///srv/repo', '/srv/repo', 'http://127.0.0.1:8080/x', 'https://internal.example/x']) {
    t.same(await vetRepository(url, { allowLocal: true, lookup }), [], url);
  }
});

t.test('remote-helper and unknown transports are refused whatever the option says', async (t) => {
  for (const allowLocal of [false, true]) {
    for (const url of ['fd::3', 'foo::bar', 'gopher://public.example/x', 'http://a@b@public.example/']) {
      const e = await vetRepository(url, { allowLocal, lookup }).catch((err: unknown) => err);
      t.match(e, { status: 422, code: 'repository_not_allowed' }, `${url} (allowLocal ${allowLocal})`);
    }
  }
});

t.test('ssh is pinned to a checked address, host keys still looked up by the name; git:// by name is refused', async (t) => {
  for (const url of ['ssh://git@public.example/acme/web.git', 'git@public.example:acme/web.git', 'git+ssh://public.example:2222/x']) {
    const args = gitConfigArgs(await vetRepository(url, strict));
    t.ok(args.includes('core.sshCommand=ssh -o BatchMode=yes -o HostName=140.82.112.3 -o HostKeyAlias=public.example'), url);
    t.notOk(args.some((a) => a.startsWith('kiln.')), 'the pin is no git setting of its own');
  }
  t.ok(gitConfigArgs(await vetRepository('ssh://git@140.82.112.3/x', strict)).includes('core.sshCommand=ssh -o BatchMode=yes'), 'an address literal is its own pin');
  t.ok(gitConfigArgs(await vetRepository('https://public.example/x', strict), ['-o', 'X=y']).includes('core.sshCommand=ssh -o X=y'), 'the caller\'s ssh options');
  const e = await refusal(t, 'git://public.example/acme/web.git');
  t.match(e, { status: 422, code: 'repository_not_allowed', message: /git:\/\/ cannot be held to the address kiln checks/ });
  t.ok(await vetRepository('git://140.82.112.3/acme/web.git', strict), 'git:// to an address literal: nothing to resolve again');
  t.ok(await vetRepository('git://nowhere.example/x', strict), 'git:// to a name that does not resolve reaches nothing: accepted');
  t.same(await vetRepository('git://public.example/x', { allowLocal: true, lookup }), [], 'the option lets it through');
});

t.test('real git and ssh: the pin decides where ssh connects, whatever GIT_SSH_COMMAND the server was started with', async (t) => {
  // A TCP listener on loopback stands for the checked address; the URL's name resolves nowhere.
  const banners: string[] = [];
  const server = createServer((socket) => {
    socket.once('data', (chunk: Buffer) => {
      banners.push(chunk.toString('latin1').split('\r\n')[0]!);
      socket.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => server.close());
  const port = (server.address() as AddressInfo).port;
  const options = ['protocol.allow=never', 'protocol.ssh.allow=always', 'kiln.sshPin=-o HostName=127.0.0.1 -o HostKeyAlias=pinned.invalid'];
  const saved = process.env['GIT_SSH_COMMAND'];
  process.env['GIT_SSH_COMMAND'] = 'ssh -o HostName=192.0.2.1';
  t.teardown(() => {
    if (saved === undefined) delete process.env['GIT_SSH_COMMAND'];
    else process.env['GIT_SSH_COMMAND'] = saved;
  });
  await new Promise<void>((resolve) => {
    execFile('git', [...gitConfigArgs(options, ['-o', 'BatchMode=yes', '-o', 'ConnectTimeout=5']), 'ls-remote', '--', `ssh://git@pinned.invalid:${port}/x`], { env: gitEnvironment(), timeout: 20_000 }, () => resolve());
  });
  t.equal(banners.length, 1, 'ssh connected to the pinned address');
  t.match(banners[0], /^SSH-2\.0-OpenSSH/, 'a real OpenSSH client');
});
