// Which IP addresses are public: everything kiln may reach on a tenant's behalf (webhooks, task
// actions, upstream caches) unless an operator lists more in outbound.allowedNetworks. A tenant
// must not reach kiln's own host, its database, a cloud's metadata service (169.254.169.254) or
// anything else on the private side of the network. The ranges are IANA's special-purpose
// registries (RFC 6890 and its updates); an IPv6 form that carries an IPv4 address (mapped,
// compatible, NAT64, 6to4) is judged by that IPv4 address.
import { BlockList, isIP } from 'node:net';

type Range = readonly [network: string, prefix: number, name: string];

const SPECIAL_V4: readonly Range[] = [
  ['0.0.0.0', 8, '"this network" (0.0.0.0/8)'],
  ['10.0.0.0', 8, 'private (10.0.0.0/8)'],
  ['100.64.0.0', 10, 'shared address space (100.64.0.0/10)'],
  ['127.0.0.0', 8, 'loopback (127.0.0.0/8)'],
  ['169.254.0.0', 16, 'link-local (169.254.0.0/16)'],
  ['172.16.0.0', 12, 'private (172.16.0.0/12)'],
  ['192.0.0.0', 24, 'IETF protocol assignments (192.0.0.0/24)'],
  ['192.0.2.0', 24, 'documentation (192.0.2.0/24)'],
  ['192.88.99.0', 24, '6to4 relay anycast (192.88.99.0/24)'],
  ['192.168.0.0', 16, 'private (192.168.0.0/16)'],
  ['198.18.0.0', 15, 'benchmarking (198.18.0.0/15)'],
  ['198.51.100.0', 24, 'documentation (198.51.100.0/24)'],
  ['203.0.113.0', 24, 'documentation (203.0.113.0/24)'],
  ['224.0.0.0', 4, 'multicast (224.0.0.0/4)'],
  ['240.0.0.0', 4, 'reserved (240.0.0.0/4)'],
];

// Checked after the IPv4-carrying forms (::/96, ::ffff:0:0/96, 64:ff9b::/96, 2002::/16) are unwrapped.
const SPECIAL_V6: readonly Range[] = [
  ['64:ff9b:1::', 48, 'local-use NAT64 (64:ff9b:1::/48)'],
  ['100::', 64, 'discard-only (100::/64)'],
  ['2001::', 23, 'IETF protocol assignments (2001::/23)'],
  ['2001:db8::', 32, 'documentation (2001:db8::/32)'],
  ['3fff::', 20, 'documentation (3fff::/20)'],
  ['5f00::', 16, 'segment routing (5f00::/16)'],
  ['fc00::', 7, 'unique local (fc00::/7)'],
  ['fe80::', 10, 'link-local (fe80::/10)'],
  ['fec0::', 10, 'site-local (fec0::/10)'],
  ['ff00::', 8, 'multicast (ff00::/8)'],
];

function blockListOf(ranges: readonly Range[], type: 'ipv4' | 'ipv6'): (address: string) => string | null {
  const lists = ranges.map(([network, prefix, name]) => {
    const list = new BlockList();
    list.addSubnet(network, prefix, type);
    return { list, name };
  });
  return (address) => lists.find(({ list }) => list.check(address, type))?.name ?? null;
}

const specialV4 = blockListOf(SPECIAL_V4, 'ipv4');
const specialV6 = blockListOf(SPECIAL_V6, 'ipv6');
const globalUnicastV6 = new BlockList();
globalUnicastV6.addSubnet('2000::', 3, 'ipv6');

/** The eight 16-bit groups of an IPv6 address (a zone suffix is ignored), or null when it is not one. */
export function ipv6Groups(text: string): number[] | null {
  const address = text.replace(/%.*$/, '');
  if (isIP(address) !== 6) return null;
  let tail: number[] = [];
  let body = address;
  const dotted = /^(.*:)(\d+\.\d+\.\d+\.\d+)$/.exec(address);
  if (dotted) {
    const octets = dotted[2]!.split('.').map(Number);
    tail = [(octets[0]! << 8) | octets[1]!, (octets[2]! << 8) | octets[3]!];
    body = dotted[1]!.endsWith('::') ? dotted[1]! : dotted[1]!.slice(0, -1);
  }
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((g) => parseInt(g, 16)));
  const [head = '', rest] = body.split('::');
  const left = parse(head);
  const right = [...(rest === undefined ? [] : parse(rest)), ...tail];
  const groups = rest === undefined ? [...left, ...tail] : [...left, ...Array<number>(8 - left.length - right.length).fill(0), ...right];
  return groups.length === 8 ? groups : null;
}

const v4Of = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;

/** The IPv4 address an IPv6 address stands for (mapped ::ffff:a.b.c.d), or null. */
export function mappedIpv4(address: string): string | null {
  const g = ipv6Groups(address);
  if (g === null || g.slice(0, 5).some((x) => x !== 0) || g[5] !== 0xffff) return null;
  return v4Of(g[6]!, g[7]!);
}

/** The IPv4 address inside an IPv6 form that carries one (mapped, compatible, NAT64, 6to4), or null. */
function carriedIpv4(g: readonly number[]): { v4: string; form: string } | null {
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zeros(0, 5) && g[5] === 0xffff) return { v4: v4Of(g[6]!, g[7]!), form: 'IPv4-mapped' };
  if (zeros(0, 6)) return { v4: v4Of(g[6]!, g[7]!), form: 'IPv4-compatible' };
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return { v4: v4Of(g[6]!, g[7]!), form: 'NAT64' };
  if (g[0] === 0x2002) return { v4: v4Of(g[1]!, g[2]!), form: '6to4' };
  return null;
}

/**
 * Why `address` is not a public unicast address (the name of its special-purpose range), or
 * null when it is public. Anything that is not an IP address is not public either.
 */
export function nonPublicRange(address: string): string | null {
  const family = isIP(address.replace(/%.*$/, ''));
  if (family === 4) return specialV4(address);
  if (family !== 6) return 'not an IP address';
  const groups = ipv6Groups(address)!;
  if (groups.every((x) => x === 0)) return 'unspecified (::)';
  if (groups.slice(0, 7).every((x) => x === 0) && groups[7] === 1) return 'loopback (::1)';
  const carried = carriedIpv4(groups);
  if (carried !== null) {
    const inner = specialV4(carried.v4);
    return inner === null ? null : `${carried.form} ${carried.v4}, ${inner}`;
  }
  const bare = address.replace(/%.*$/, '');
  return specialV6(bare) ?? (globalUnicastV6.check(bare, 'ipv6') ? null : 'not global unicast (outside 2000::/3)');
}
