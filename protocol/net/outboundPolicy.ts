// The one rule for every destination kiln connects to on a tenant's behalf: a public address, or
// one inside a network the operator listed in outbound.allowedNetworks. Pure: the caller resolves
// names and asks about each address it would connect to.
import { BlockList, isIP } from 'node:net';
import { mappedIpv4, nonPublicRange } from './addressRanges.js';

export const OUTBOUND_OPTION = 'outbound.allowedNetworks';

/** A URL's host as kiln connects to it: an IP address (literal) or a name to resolve. */
export type UrlHost = { kind: 'ip'; address: string } | { kind: 'name'; name: string };

/**
 * WHATWG URL parsing has already turned `http://2130706433/`, `http://127.1/` and
 * `http://0x7f.0.0.1/` into 127.0.0.1, and `[::ffff:127.0.0.1]` into `[::ffff:7f00:1]`.
 */
export function urlHost(url: URL): UrlHost {
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  return isIP(host) ? { kind: 'ip', address: host } : { kind: 'name', name: host };
}

export class OutboundPolicy {
  private readonly allowed = new BlockList();

  /** `allowedNetworks`: CIDR ranges (a bare address is a /32 or /128), as the option's kind checked them */
  constructor(readonly allowedNetworks: readonly string[]) {
    for (const cidr of allowedNetworks) {
      const [address = '', bits] = cidr.split('/');
      const family = isIP(address);
      if (family === 0) throw new Error(`${OUTBOUND_OPTION}: not a CIDR range: ${JSON.stringify(cidr)}`);
      this.allowed.addSubnet(address, bits === undefined ? (family === 4 ? 32 : 128) : Number(bits), family === 4 ? 'ipv4' : 'ipv6');
    }
  }

  /** Whether an operator listed the network of `address` (an IPv4-mapped address counts as its IPv4 address). */
  private listed(address: string): boolean {
    const bare = address.replace(/%.*$/, '');
    const family = isIP(bare);
    if (family === 4) return this.allowed.check(bare, 'ipv4');
    if (family !== 6) return false;
    const v4 = mappedIpv4(bare);
    return v4 !== null ? this.allowed.check(v4, 'ipv4') : this.allowed.check(bare, 'ipv6');
  }

  /** Null when kiln may connect to `address`; otherwise why not, in words naming the option. */
  refusal(address: string): string | null {
    const range = nonPublicRange(address);
    if (range === null || this.listed(address)) return null;
    return `${address} is ${range}, not a public address, and ${OUTBOUND_OPTION} does not list it`;
  }
}
