import t from 'tap';
import { ipv6Groups, nonPublicRange, OutboundPolicy, urlHost } from '../../../protocol/index.js';

// The address classification behind outbound.allowedNetworks: every special range refused, the
// spellings of an address (decimal, short, hex, IPv4 inside IPv6) judged as that address, and
// public addresses left alone.

t.test('every special-purpose range is not public, and says which it is', async (t) => {
  const cases: [string, RegExp][] = [
    ['127.0.0.1', /loopback/], ['127.255.255.254', /loopback/], ['::1', /loopback/],
    ['0.0.0.0', /this network/], ['0.1.2.3', /this network/], ['::', /unspecified/],
    ['10.0.0.1', /private/], ['172.16.0.1', /private/], ['172.31.255.255', /private/], ['192.168.1.1', /private/],
    ['100.64.0.1', /shared/], ['100.127.255.255', /shared/],
    ['169.254.169.254', /link-local/], ['fe80::1', /link-local/], ['fe80::1%eth0', /link-local/],
    ['fc00::1', /unique local/], ['fd12:3456::1', /unique local/],
    ['224.0.0.1', /multicast/], ['239.255.255.250', /multicast/], ['ff02::1', /multicast/],
    ['240.0.0.1', /reserved/], ['255.255.255.255', /reserved/],
    ['192.0.2.1', /documentation/], ['198.51.100.7', /documentation/], ['203.0.113.9', /documentation/], ['2001:db8::1', /documentation/],
    ['198.18.0.1', /benchmarking/], ['192.0.0.8', /IETF/], ['2001::1', /IETF/], ['100::1', /discard/],
    ['fec0::1', /site-local/], ['64:ff9b:1::1', /NAT64/],
    // IPv4 carried inside IPv6
    ['::ffff:127.0.0.1', /IPv4-mapped 127\.0\.0\.1, loopback/], ['::ffff:7f00:1', /IPv4-mapped 127\.0\.0\.1, loopback/],
    ['0:0:0:0:0:ffff:a9fe:a9fe', /IPv4-mapped 169\.254\.169\.254, link-local/], ['::ffff:10.0.0.1', /private/],
    ['::127.0.0.1', /IPv4-compatible 127\.0\.0\.1/], ['::a00:1', /IPv4-compatible 10\.0\.0\.1/],
    ['64:ff9b::7f00:1', /NAT64 127\.0\.0\.1/], ['64:ff9b::192.168.0.1', /NAT64 192\.168\.0\.1/],
    ['2002:7f00:1::', /6to4 127\.0\.0\.1/], ['2002:a9fe:a9fe::1', /6to4 169\.254\.169\.254/],
    // outside IPv6 global unicast
    ['4000::1', /not global unicast/], ['e000::1', /not global unicast/],
    ['localhost', /not an IP address/], ['', /not an IP address/],
  ];
  for (const [address, why] of cases) t.match(nonPublicRange(address), why, address);
});

t.test('public addresses are public, right next to the special ranges too', async (t) => {
  for (const address of [
    '8.8.8.8', '1.1.1.1', '9.255.255.255', '11.0.0.0', '100.63.255.255', '100.128.0.0', '126.255.255.255', '128.0.0.1',
    '169.253.255.255', '172.15.255.255', '172.32.0.0', '192.167.255.255', '192.169.0.0', '223.255.255.255',
    '2606:4700:4700::1111', '2a00:1450:4001:80b::200e', '2001:4860:4860::8888', '::ffff:8.8.8.8', '64:ff9b::808:808', '2002:808:808::1',
  ]) t.equal(nonPublicRange(address), null, address);
});

t.test('URL parsing turns every spelling of an address into the address', async (t) => {
  const cases: [string, string][] = [
    ['http://2130706433/', '127.0.0.1'], ['http://127.1/', '127.0.0.1'], ['http://127.0.1/', '127.0.0.1'],
    ['http://0x7f.0.0.1/', '127.0.0.1'], ['http://0177.0.0.1/', '127.0.0.1'], ['http://0x7f000001/', '127.0.0.1'],
    ['http://0/', '0.0.0.0'], ['http://2852039166/latest/meta-data/', '169.254.169.254'],
    ['http://[::ffff:127.0.0.1]:8080/', '::ffff:7f00:1'], ['http://[0:0:0:0:0:0:0:1]/', '::1'], ['http://[::]/', '::'],
  ];
  for (const [url, address] of cases) {
    const host = urlHost(new URL(url));
    t.same(host, { kind: 'ip', address }, url);
    t.not(nonPublicRange(address), null, `${url} is not public`);
  }
  t.same(urlHost(new URL('http://LocalHost./x')), { kind: 'name', name: 'localhost.' }, 'a name stays a name, to be resolved');
});

t.test('ipv6Groups reads every form of an IPv6 address', async (t) => {
  t.same(ipv6Groups('1:2:3:4:5:6:7:8'), [1, 2, 3, 4, 5, 6, 7, 8]);
  t.same(ipv6Groups('1::'), [1, 0, 0, 0, 0, 0, 0, 0]);
  t.same(ipv6Groups('::1'), [0, 0, 0, 0, 0, 0, 0, 1]);
  t.same(ipv6Groups('1::8'), [1, 0, 0, 0, 0, 0, 0, 8]);
  t.same(ipv6Groups('::ffff:1.2.3.4'), [0, 0, 0, 0, 0, 0xffff, 0x0102, 0x0304]);
  t.same(ipv6Groups('1:2:3:4:5:6:1.2.3.4'), [1, 2, 3, 4, 5, 6, 0x0102, 0x0304]);
  t.same(ipv6Groups('::1.2.3.4'), [0, 0, 0, 0, 0, 0, 0x0102, 0x0304]);
  t.equal(ipv6Groups('1.2.3.4'), null);
  t.equal(ipv6Groups('1:::2'), null);
});

t.test('outbound.allowedNetworks lets listed networks through, and only those', async (t) => {
  const none = new OutboundPolicy([]);
  t.match(none.refusal('127.0.0.1'), /^127\.0\.0\.1 is loopback \(127\.0\.0\.0\/8\), not a public address, and outbound\.allowedNetworks does not list it$/);
  t.equal(none.refusal('8.8.8.8'), null, 'public needs no listing');
  const listed = new OutboundPolicy(['127.0.0.0/8', '10.20.0.0/16', 'fd00::/8', '192.168.1.5']);
  t.equal(listed.refusal('127.0.0.1'), null);
  t.equal(listed.refusal('::ffff:127.0.0.1'), null, 'an IPv4-mapped address is its IPv4 address');
  t.equal(listed.refusal('10.20.3.4'), null);
  t.match(listed.refusal('10.21.0.1'), /private/, 'a neighbouring network is not listed');
  t.equal(listed.refusal('fd00::5'), null);
  t.match(listed.refusal('::1'), /loopback/, '127.0.0.0/8 does not cover ::1');
  t.equal(listed.refusal('192.168.1.5'), null, 'a bare address is one host');
  t.match(listed.refusal('192.168.1.6'), /private/);
  t.match(listed.refusal('169.254.169.254'), /link-local/);
  t.throws(() => new OutboundPolicy(['not-a-cidr']), /outbound\.allowedNetworks/);
});
