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
    const family = isIP(address);
    if (!family) return false;
    const mapped = family === 6 ? /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address) : null;
    if (mapped) return this.list.check(mapped[1]!, 'ipv4');
    return this.list.check(address, family === 4 ? 'ipv4' : 'ipv6');
  }
}

/** uWS prints IPv6 addresses in full (0000:…:0001); this gives the compact form and unwraps IPv4. */
export function normalizeAddress(text: string): string {
  if (isIP(text) === 4) return text;
  const mapped = /^(?:0{1,4}:){5}ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(text) ?? /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(text);
  if (mapped) {
    const hi = parseInt(mapped[1]!, 16), lo = parseInt(mapped[2]!, 16);
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  const dotted = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(text);
  if (dotted) return dotted[1]!;
  if (isIP(text) !== 6) return text;
  try {
    return new URL(`http://[${text}]/`).hostname.slice(1, -1);
  } catch {
    return text;
  }
}

/** The client's address: the peer, or the right-most untrusted X-Forwarded-For hop. */
export function clientAddress(peer: string, forwardedFor: string | undefined, trusted: CidrSet): string {
  if (!forwardedFor || !trusted.has(peer)) return peer;
  const hops = forwardedFor.split(',').map((h) => normalizeAddress(h.trim())).filter((h) => isIP(h));
  for (let i = hops.length - 1; i >= 0; i--) if (!trusted.has(hops[i]!)) return hops[i]!;
  return hops[0] ?? peer;
}
