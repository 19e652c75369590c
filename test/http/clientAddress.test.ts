// One spelling per client address (http/clientAddress.ts): an IPv4 peer a dual-stack socket shows as
// IPv4-mapped IPv6, in whatever spelling, is its IPv4 address for normalizeAddress, for the trusted
// proxies (CidrSet) and for the peer a serving thread vouches for (forwardedPeer), so the limits and
// checks per address (proto.anonymousCache.maxConnectionsPerIp, /proto's loopback, X-Forwarded-For)
// see one key per client.
import t from 'tap';
import { CidrSet, clientAddress, normalizeAddress } from '../../http/clientAddress.js';
import { forwardedPeer, forwardedPeerValue, forwardingSecret } from '../../http/serving/forwardedPeer.js';

const MAPPED_SPELLINGS = [
  '::ffff:203.0.113.7', '::FFFF:203.0.113.7', '0:0:0:0:0:ffff:203.0.113.7', '0000:0000:0000:0000:0000:ffff:203.0.113.7',
  '::ffff:cb00:7107', '0000:0000:0000:0000:0000:FFFF:CB00:7107', '0:0:0:0:0:ffff:cb00:7107',
];

t.test('every spelling of an IPv4-mapped address is the IPv4 address', async (t) => {
  for (const spelling of MAPPED_SPELLINGS) t.equal(normalizeAddress(spelling), '203.0.113.7', spelling);
  t.equal(normalizeAddress('203.0.113.7'), '203.0.113.7');
  t.equal(normalizeAddress('0000:0000:0000:0000:0000:0000:0000:0001'), '::1', 'IPv6 in full: compact');
  t.equal(normalizeAddress('2001:DB8:0:7::1'), '2001:db8:0:7::1');
  t.equal(normalizeAddress('::ffff:0:203.0.113.7'), '::ffff:0:cb00:7107', 'IPv4-translated (not mapped) stays IPv6');
  t.equal(normalizeAddress('not an address'), 'not an address');
});

t.test('a trusted proxy given as IPv4 is trusted under any mapped spelling', async (t) => {
  const trusted = new CidrSet(['127.0.0.1/8', '203.0.113.0/24']);
  for (const spelling of MAPPED_SPELLINGS) t.ok(trusted.has(spelling), spelling);
  t.ok(trusted.has('0000:0000:0000:0000:0000:ffff:7f00:0001'), 'loopback as uWS prints it');
  t.notOk(trusted.has('::ffff:198.51.100.1'));
  t.equal(clientAddress('0000:0000:0000:0000:0000:ffff:7f00:0001', '198.51.100.9', trusted), '198.51.100.9', 'its X-Forwarded-For is believed');
});

t.test('the peer a serving thread vouches for is spelled as the main thread spells its own peers', async (t) => {
  const secret = forwardingSecret();
  t.equal(forwardedPeer(forwardedPeerValue(secret, '0000:0000:0000:0000:0000:ffff:cb00:7107')), '203.0.113.7');
  t.equal(forwardedPeer(forwardedPeerValue(secret, '0000:0000:0000:0000:0000:0000:0000:0001')), '::1');
  t.equal(forwardedPeer(forwardedPeerValue(secret, '2001:0db8:0000:0007:0000:0000:0000:0001')), '2001:db8:0:7::1');
  t.equal(forwardedPeer(forwardedPeerValue('x'.repeat(secret.length), '203.0.113.7')), undefined, 'not without the secret');
});

t.test('a hop a trusted proxy wrote with a port or brackets is still the client, not the entry left of it', async (t) => {
  const trusted = new CidrSet(['10.0.0.0/8']);
  t.equal(clientAddress('10.0.0.1', '192.0.2.66, 1.2.3.4:80', trusted), '1.2.3.4', 'IPv4 with a port');
  t.equal(clientAddress('10.0.0.1', '192.0.2.66, [2001:db8::1]:443', trusted), '2001:db8::1', 'bracketed IPv6 with a port');
  t.equal(clientAddress('10.0.0.1', '192.0.2.66, [2001:DB8:0::1]', trusted), '2001:db8::1', 'bracketed IPv6, normalized');
  t.equal(clientAddress('10.0.0.1', '192.0.2.66, 2001:db8::1:80', trusted), '2001:db8::1:80', 'a bare IPv6 address keeps its last group');
  t.equal(clientAddress('10.0.0.1', '192.0.2.66, [10.0.0.2]:8080', trusted), '192.0.2.66', 'a trusted hop with a port is skipped like one without');
});

t.test('a hop that is no address ends the walk: the client cannot pick its address behind it', async (t) => {
  const trusted = new CidrSet(['10.0.0.0/8']);
  t.equal(clientAddress('10.0.0.1', '192.0.2.66, garbage', trusted), '10.0.0.1', 'the right-most hop: the proxy (the peer) is the last one known');
  t.equal(clientAddress('10.0.0.1', '192.0.2.66, garbage, 10.0.0.2', trusted), '10.0.0.2', 'behind a trusted hop: that hop');
  t.equal(clientAddress('10.0.0.1', '192.0.2.66, unknown', trusted), '10.0.0.1', '"unknown"');
  t.equal(clientAddress('10.0.0.1', '192.0.2.66, , 10.0.0.2', trusted), '10.0.0.2', 'an empty hop');
  t.equal(clientAddress('10.0.0.1', '1.2.3.4:99999999', trusted), '10.0.0.1', 'a port that does not parse');
  t.equal(clientAddress('10.0.0.1', 'garbage, 198.51.100.9', trusted), '198.51.100.9', 'garbage left of the client is never reached');
  t.equal(clientAddress('10.0.0.1', '10.0.0.3, 10.0.0.2', trusted), '10.0.0.3', 'every hop trusted: the left-most');
  t.equal(clientAddress('198.51.100.1', 'garbage', trusted), '198.51.100.1', 'an untrusted peer\'s header is not read');
});
