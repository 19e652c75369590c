// proto.anonymousCache.maxConnectionsPerIp: how many anonymous cache protocol connections each
// client address holds. Entries go when their last connection does, so the map stays as large as
// the set of addresses connected right now. An IPv6 client is counted by its /64: one host
// commonly holds a whole /64, so counting exact addresses would leave it unbounded.
import { normalizeAddress } from '../clientAddress.js';

/** What an address is counted as: an IPv4 address itself, an IPv6 one its /64 (`2001:db8:0:1::/64`). */
function slotKey(address: string): string {
  // an IPv4-mapped address (however spelled) counts as its IPv4 address, not as the /64 every mapped address shares
  const bare = normalizeAddress(address.split('%')[0]!.toLowerCase());
  // IPv4 and anything unexpected: counted as given.
  if (!bare.includes(':') || bare.includes('.')) return bare;
  const halves = bare.split('::');
  if (halves.length > 2) return address;
  const head = halves[0] === '' ? [] : halves[0]!.split(':');
  const tail = halves.length === 1 || halves[1] === '' ? [] : halves[1]!.split(':');
  const groups = halves.length === 1 ? head : [...head, ...Array<string>(Math.max(0, 8 - head.length - tail.length)).fill('0'), ...tail];
  if (groups.length !== 8 || !groups.every((g) => /^[0-9a-f]{1,4}$/.test(g))) return address;
  return `${groups.slice(0, 4).map((g) => parseInt(g, 16).toString(16)).join(':')}::/64`;
}

export class AnonymousSlots {
  private readonly held = new Map<string, number>();

  constructor(private readonly perAddress: number) {}

  /** Whether `address` may open one more (asked at the upgrade, to answer 429 before any socket exists). */
  hasRoom(address: string): boolean {
    return (this.held.get(slotKey(address)) ?? 0) < this.perAddress;
  }

  /** Takes a slot for `address`; false when it holds them all. */
  take(address: string): boolean {
    const key = slotKey(address);
    const count = this.held.get(key) ?? 0;
    if (count >= this.perAddress) return false;
    this.held.set(key, count + 1);
    return true;
  }

  release(address: string): void {
    const key = slotKey(address);
    const count = this.held.get(key) ?? 0;
    if (count <= 1) this.held.delete(key);
    else this.held.set(key, count - 1);
  }
}
