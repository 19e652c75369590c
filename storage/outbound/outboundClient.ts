// Every connection kiln opens on a tenant's behalf (webhook deliveries, task actions, upstream
// caches) goes through here. The policy is applied to the address actually connected to: an IP
// literal before the request, a name inside the socket's own DNS lookup, so a name that resolves
// to a public address when checked and to 127.0.0.1 when connecting (DNS rebinding) cannot slip
// through. A name with any refused address is refused as a whole.
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { OutboundPolicy, urlHost } from '../../protocol/index.js';

/** The error of a refused destination; `code` tells it from network faults. */
export class OutboundRefusedError extends Error {
  readonly code = 'ERR_OUTBOUND_REFUSED';
  constructor(message: string) {
    super(message);
    this.name = 'OutboundRefusedError';
  }
}

export interface OutboundClientOptions {
  /** outbound.allowedNetworks */
  allowedNetworks: readonly string[];
  /** open connections per host (default: Node's, unbounded) */
  maxSockets?: number;
  /** the creation-time check waits this long for DNS, then leaves the decision to connect time (default 5 s) */
  resolveTimeoutMs?: number;
  /** a name's addresses (default: the system resolver, dns.lookup); tests stand in a changing DNS */
  resolve?: (name: string) => Promise<LookupAddress[]>;
}

export interface OutboundClient {
  readonly policy: OutboundPolicy;
  /**
   * An http(s) request to `url` on the guarded agents; throws OutboundRefusedError at once for a
   * refused IP literal, and the request fails with one when a name resolves to a refused address.
   */
  request(url: URL, options: http.RequestOptions): http.ClientRequest;
  /**
   * Why kiln would refuse `url` (its literal address, or an address its name resolves to now), or
   * null. For the check when a webhook, action or upstream is saved; connecting checks again.
   */
  refusalOf(url: string): Promise<string | null>;
  /**
   * The addresses `host` (an IP literal or a name, resolved now) may be connected to, or why not:
   * a refused address, or a name that does not resolve. For a connection another program opens
   * (ssh): it is given one of these addresses, not the name, so it cannot resolve the name again
   * to somewhere else (DNS rebinding).
   */
  connectableAddresses(host: string): Promise<{ addresses: string[] } | { refusal: string }>;
  close(): void;
}

export function createOutboundClient(opts: OutboundClientOptions): OutboundClient {
  const policy = new OutboundPolicy(opts.allowedNetworks);
  const resolveTimeoutMs = opts.resolveTimeoutMs ?? 5_000;
  const resolve = opts.resolve ?? systemResolve;

  const refusedAmong = (name: string, addresses: readonly LookupAddress[]): string | null => {
    for (const { address } of addresses) {
      const why = policy.refusal(address);
      if (why !== null) return `${name} resolves to ${why}`;
    }
    return null;
  };

  // The socket's own lookup: whatever it answers is what the socket connects to.
  const lookup: LookupFunction = (hostname, options, callback) => {
    resolve(hostname).then(
      (found) => {
        const addresses = options.family === 4 || options.family === 6 ? found.filter((a) => a.family === options.family) : found;
        if (addresses.length === 0) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '', 0);
        const refused = refusedAmong(hostname, found);
        if (refused !== null) return callback(new OutboundRefusedError(refused), '', 0);
        if (options.all) return callback(null, addresses);
        callback(null, addresses[0]!.address, addresses[0]!.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, '', 0),
    );
  };

  const agentOptions = { keepAlive: true, scheduling: 'lifo' as const, lookup, ...(opts.maxSockets ? { maxSockets: opts.maxSockets } : {}) };
  const agents = { http: new http.Agent(agentOptions), https: new https.Agent(agentOptions) };

  return {
    policy,

    request(url, options) {
      const host = urlHost(url);
      if (host.kind === 'ip') {
        const why = policy.refusal(host.address);
        if (why !== null) throw new OutboundRefusedError(why);
      }
      if (url.protocol === 'https:') return https.request(url, { ...options, agent: agents.https, lookup });
      if (url.protocol === 'http:') return http.request(url, { ...options, agent: agents.http, lookup });
      throw new OutboundRefusedError(`${url.protocol}// is not http:// or https://`);
    },

    async refusalOf(text) {
      let url: URL;
      try {
        url = new URL(text);
      } catch {
        return `not a URL: ${text.slice(0, 200)}`;
      }
      const host = urlHost(url);
      if (host.kind === 'ip') return policy.refusal(host.address);
      const addresses = await resolveWithin(resolve, host.name, resolveTimeoutMs);
      return addresses === null ? null : refusedAmong(host.name, addresses);
    },

    async connectableAddresses(host) {
      const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
      if (isIP(bare) !== 0) {
        const why = policy.refusal(bare);
        return why === null ? { addresses: [bare] } : { refusal: why };
      }
      const addresses = await resolveWithin(resolve, bare, resolveTimeoutMs);
      if (addresses === null || addresses.length === 0) return { refusal: `${bare} does not resolve` };
      const refused = refusedAmong(bare, addresses);
      return refused === null ? { addresses: [...new Set(addresses.map((a) => a.address))] } : { refusal: refused };
    },

    close() {
      agents.http.destroy();
      agents.https.destroy();
    },
  };
}

const systemResolve = (name: string): Promise<LookupAddress[]> =>
  new Promise((resolve, reject) => dnsLookup(name, { all: true }, (err, addresses) => (err ? reject(err) : resolve(addresses))));

/** The name's addresses, or null when it does not resolve (yet) or DNS takes longer than `ms`. */
function resolveWithin(resolve: (name: string) => Promise<LookupAddress[]>, name: string, ms: number): Promise<LookupAddress[] | null> {
  return new Promise((done) => {
    const timer = setTimeout(() => done(null), ms);
    resolve(name).then(
      (addresses) => {
        clearTimeout(timer);
        done(addresses);
      },
      () => {
        clearTimeout(timer);
        done(null);
      },
    );
  });
}
