// X-Forwarded-For is believed only from peers in http.trustedProxies; otherwise anyone could
// claim an address inside a key's allowed_ips.
import { BlockList, isIP } from 'node:net';

/** A set of CIDR blocks (IPv4 and IPv6). */
export class CidrSet {
  private readonly list = new BlockList();

  constructor(cidrs: readonly string[]) {
    for (const cidr of cidrs) {
      const [addr, bits] = cidr.split('/');
      const family = isIP(addr ?? '');
      if (!family) throw new Error(`not a CIDR block: ${JSON.stringify(cidr)}`);
      const type = family === 4 ? 'ipv4' : 'ipv6';
      this.list.addSubnet(addr!, bits === undefined ? (family === 4 ? 32 : 128) : Number(bits), type);
    }
  }

  has(address: string): boolean {
    // an IPv4-mapped address in any spelling is checked as its IPv4 address
    const normal = normalizeAddress(address);
    const family = isIP(normal);
    if (!family) return false;
    return this.list.check(normal, family === 4 ? 'ipv4' : 'ipv6');
  }
}

/**
 * One spelling per address: uWS prints IPv6 addresses in full (0000:…:0001), a dual-stack socket
 * an IPv4 peer as IPv4-mapped (`::ffff:1.2.3.4`, `0:0:0:0:0:ffff:0102:0304`, …); this gives the
 * compact form and unwraps IPv4, so limits and checks per address see one key per client.
 */
export function normalizeAddress(text: string): string {
  if (isIP(text) === 4) return text;
  if (isIP(text) !== 6) return text;
  let compact: string;
  try {
    // the URL parser writes every IPv6 spelling (full, dotted, upper case) as one compact hex form
    compact = new URL(`http://[${text}]/`).hostname.slice(1, -1);
  } catch {
    return text;
  }
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(compact);
  if (!mapped) return compact;
  const hi = parseInt(mapped[1]!, 16), lo = parseInt(mapped[2]!, 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

/**
 * An X-Forwarded-For hop's address: some proxies write the port too (`1.2.3.4:80`,
 * `[2001:db8::1]:443`) or brackets alone; dropping such a hop would make the entry left of it,
 * which the client wrote, the client's address. A bare IPv6 address (colons, no brackets) is kept whole.
 */
function hopAddress(text: string): string {
  const bracketed = /^\[([^\]]+)\](?::\d{1,5})?$/.exec(text);
  if (bracketed) return bracketed[1]!;
  const v4WithPort = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/.exec(text);
  return v4WithPort ? v4WithPort[1]! : text;
}

/**
 * The client's address: the peer, or the right-most untrusted X-Forwarded-For hop. The walk from
 * the right stops at a hop that is no address (garbage, `unknown`, empty): who wrote it is unknown,
 * and skipping it would make the entry left of it, which the client itself may have written, the
 * client's address. The address is then the last one known, the trusted hop right of it (or the peer).
 */
export function clientAddress(peer: string, forwardedFor: string | undefined, trusted: CidrSet): string {
  if (!forwardedFor || !trusted.has(peer)) return peer;
  const hops = forwardedFor.split(',');
  let known = peer;
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = normalizeAddress(hopAddress(hops[i]!.trim()));
    if (!isIP(hop)) return known;
    if (!trusted.has(hop)) return hop;
    known = hop;
  }
  return known; // every hop a trusted proxy: the left-most one
}

/**
 * Every X-Forwarded-For line of a request, joined with ", " (RFC 9110 §5.3), or undefined. uWS's
 * getHeader gives the first line only, while a proxy may add its own line after the client's:
 * reading the first alone would take the client's words for the address (review r4a).
 */
export function forwardedForOf(req: { forEach(cb: (key: string, value: string) => void): void }): string | undefined {
  let joined: string | undefined;
  req.forEach((key, value) => {
    if (key === 'x-forwarded-for') joined = joined === undefined ? value : `${joined}, ${value}`;
  });
  return joined === '' ? undefined : joined;
}
