// Reading repository URLs the way git does, and telling internal addresses in every spelling the
// resolvers accept: what the repository policy (repositoryPolicy.test.ts) relies on.
import t from 'tap';
import { isPrivateAddress, parseIPv4, repositoryTarget } from '../../../services/projects/repositoryAddress.js';

t.test('local paths and file:// URLs are local, as git reads them', async (t) => {
  for (const url of ['file:///srv/repo', 'FILE:///srv/repo', 'file://localhost/srv/repo', '/srv/repo', './repo', '../repo', 'repo', 'x', 'dir/with:colon', '~/repo']) {
    t.same(repositoryTarget(url), { kind: 'local' }, url);
  }
});

t.test('hosts come out of URLs and scp-like addresses, user, port and brackets stripped', async (t) => {
  const cases: [string, string, string, number | null][] = [
    ['https://github.com/acme/web.git', 'https', 'github.com', null],
    ['https://user:pw@GitHub.com:8443/acme/web.git', 'https', 'github.com', 8443],
    ['http://127.0.0.1:8080/x', 'http', '127.0.0.1', 8080],
    ['http://[::1]/x', 'http', '::1', null],
    ['http://%31%32%37.0.0.1/x', 'http', '127.0.0.1', null],
    ['http://localhost./x', 'http', 'localhost', null],
    ['ssh://git@[::ffff:127.0.0.1]:22/x', 'ssh', '::ffff:127.0.0.1', 22],
    ['git+ssh://git@example.org/x', 'git+ssh', 'example.org', null],
    ['git://10.0.0.1/x', 'git', '10.0.0.1', null],
    ['git@github.com:acme/web.git', 'ssh', 'github.com', null],
    ['internal:repo', 'ssh', 'internal', null],
    ['[git@127.0.0.1:2222]:repo', 'ssh', '127.0.0.1', 2222],
    ['git@[::1]:repo', 'ssh', '::1', null],
  ];
  for (const [url, scheme, host, port] of cases) t.same(repositoryTarget(url), { kind: 'remote', scheme, host, port }, url);
});

t.test('transports and host parts git, curl and ssh could read differently are unsupported', async (t) => {
  for (const url of [
    'fd::17', 'ext::sh -c id', 'testgit::x', 'foo://host/x', 'gopher://host/', 'https://', 'https:///x', 'http://a@b@127.0.0.1/',
    'http://example.org\\@127.0.0.1/', 'http://exa"mple.org/', 'http://%zz/', 'http://%00/', 'http://[::1/', 'http://[::1]x/', '[oops', 'http://ex ample.org/',
  ]) {
    t.equal(repositoryTarget(url).kind, 'unsupported', url);
  }
});

t.test('IPv4 in every spelling inet_aton accepts', async (t) => {
  for (const [text, value] of [['127.0.0.1', 0x7f000001], ['2130706433', 0x7f000001], ['0x7f000001', 0x7f000001], ['017700000001', 0x7f000001], ['127.1', 0x7f000001], ['0x7f.0.0.1', 0x7f000001], ['0', 0], ['10.0.1', 0x0a000001]] as const) {
    t.equal(parseIPv4(text), value, text);
  }
  for (const text of ['256.0.0.1', '1.2.3.4.5', '0x100000000', '08', 'a.b.c.d', '', '1..2', '4294967296']) t.equal(parseIPv4(text), null, text);
});

t.test('loopback, private, link-local, unspecified and reserved addresses are private; public ones are not', async (t) => {
  for (const address of [
    '127.0.0.1', '127.255.1.2', '2130706433', '0x7f.1', '0.0.0.0', '0', '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', '169.254.169.254',
    '100.64.0.1', '224.0.0.1', '255.255.255.255', '::', '::1', '::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:10.0.0.1', '::127.0.0.1', '64:ff9b::7f00:1',
    '2002:7f00:1::', 'fe80::1', 'fe80::1%eth0', 'fc00::1', 'fd12:3456::1', 'fec0::1', 'ff02::1',
  ]) {
    t.equal(isPrivateAddress(address), true, address);
  }
  for (const address of ['8.8.8.8', '140.82.112.3', '172.32.0.1', '192.169.0.1', '::ffff:8.8.8.8', '2606:4700::1111', '2002:808:808::', '64:ff9b::808:808']) {
    t.equal(isPrivateAddress(address), false, address);
  }
  for (const text of ['github.com', 'localhost', '999.1.1.1', '']) t.equal(isPrivateAddress(text), undefined, `${text}: not an address`);
});
