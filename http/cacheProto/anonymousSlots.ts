// proto.anonymousCache.maxConnectionsPerIp: how many anonymous cache protocol connections each
// client address holds. Entries go when their last connection does, so the map stays as large as
// the set of addresses connected right now.

export class AnonymousSlots {
  private readonly held = new Map<string, number>();

  constructor(private readonly perAddress: number) {}

  /** Whether `address` may open one more (asked at the upgrade, to answer 429 before any socket exists). */
  hasRoom(address: string): boolean {
    return (this.held.get(address) ?? 0) < this.perAddress;
  }

  /** Takes a slot for `address`; false when it holds them all. */
  take(address: string): boolean {
    const count = this.held.get(address) ?? 0;
    if (count >= this.perAddress) return false;
    this.held.set(address, count + 1);
    return true;
  }

  release(address: string): void {
    const count = this.held.get(address) ?? 0;
    if (count <= 1) this.held.delete(address);
    else this.held.set(address, count - 1);
  }
}
