// Where a git repository URL points, read the way git itself reads it: a local path or file://
// URL, a host (https://, ssh://, git://, scp-like `user@host:path`), or a transport kiln does not
// speak (`<helper>::…`, unknown schemes). And whether an address is one a tenant must not reach:
// loopback, private, link-local, unspecified, multicast or reserved, in every spelling the
// resolvers accept (decimal, octal, hex and short IPv4; IPv4 inside IPv6).
// Repository-specific on purpose: the outbound address policy may absorb it later.
import { isIPv6 } from 'node:net';

export type RepositoryTarget =
  | { kind: 'local' }
  | { kind: 'remote'; scheme: string; host: string; port: number | null }
  | { kind: 'unsupported'; reason: string };

const HOST_SCHEMES = new Set(['http', 'https', 'ftp', 'ftps', 'ssh', 'git', 'git+ssh', 'ssh+git']);
/** Characters an authority may hold; anything else (a backslash, a quote) is read differently by git, curl and ssh. */
const AUTHORITY = /^[A-Za-z0-9._~%!$&'()*+,;=:@[\]-]*$/;
const HOST_NAME = /^[A-Za-z0-9._-]+$/;

export function repositoryTarget(url: string): RepositoryTarget {
  if (/^[A-Za-z0-9][A-Za-z0-9+.-]*::/.test(url)) return { kind: 'unsupported', reason: 'remote-helper transports (<name>::…) are not allowed' };
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(url);
  if (scheme) {
    const name = scheme[1]!.toLowerCase();
    if (name === 'file') return { kind: 'local' };
    if (!HOST_SCHEMES.has(name)) return { kind: 'unsupported', reason: `the ${name}:// transport is not supported (use https://, ssh:// or git://)` };
    const rest = url.slice(scheme[0].length);
    const end = rest.search(/[/?#]/);
    return authorityTarget(name, end === -1 ? rest : rest.slice(0, end), true);
  }
  // git's rule (url_is_local_not_ssh): a ':' before any '/' makes it scp-like ssh, otherwise a path.
  const colon = url.indexOf(':');
  const slash = url.indexOf('/');
  const bracket = /^[^/:]*\[/.test(url);
  if (!bracket && (colon === -1 || (slash !== -1 && slash < colon))) return { kind: 'local' };
  if (bracket) {
    const close = url.indexOf(']:');
    if (close === -1) return { kind: 'unsupported', reason: 'an scp-like address with "[" needs "]:" after the host' };
    return authorityTarget('ssh', url.slice(0, close + 1), false);
  }
  return authorityTarget('ssh', url.slice(0, colon), false);
}

function authorityTarget(scheme: string, authority: string, withPort: boolean): RepositoryTarget {
  if (!AUTHORITY.test(authority)) return { kind: 'unsupported', reason: 'the host part holds characters git, curl and ssh read differently' };
  if (authority.split('@').length > 2) return { kind: 'unsupported', reason: 'the host part holds more than one "@"' };
  const open = authority.indexOf('[');
  const at = authority.lastIndexOf('@', open === -1 ? undefined : open);
  let hostPort = authority.slice(at + 1);
  let port: number | null = null;
  let host: string;
  if (hostPort.startsWith('[')) {
    const close = hostPort.indexOf(']');
    if (close === -1) return { kind: 'unsupported', reason: 'an unclosed "[" in the host' };
    host = hostPort.slice(1, close);
    const after = hostPort.slice(close + 1);
    if (after !== '' && !(withPort && /^:\d{0,5}$/.test(after))) return { kind: 'unsupported', reason: 'unexpected text after "]" in the host' };
    if (after.length > 1) port = Number(after.slice(1));
    // scp-like `[host:port]:path` and `[user@host]:path`
    if (!isIPv6(host.split('%')[0]!)) {
      host = host.slice(host.lastIndexOf('@') + 1);
      const inner = /^(.*):(\d{1,5})$/.exec(host);
      if (inner) [host, port] = [inner[1]!, Number(inner[2])];
    }
  } else {
    const inner = withPort ? /^(.*):(\d{0,5})$/.exec(hostPort) : null;
    if (inner) [hostPort, port] = [inner[1]!, inner[2] === '' ? null : Number(inner[2])];
    host = hostPort;
  }
  let decoded: string;
  try {
    decoded = decodeURIComponent(host);
  } catch {
    return { kind: 'unsupported', reason: 'the host is not valid percent-encoding' };
  }
  decoded = decoded.replace(/\.$/, '').toLowerCase();
  if (decoded === '') return { kind: 'unsupported', reason: 'the URL names no host' };
  if (!HOST_NAME.test(decoded) && !isIPv6(decoded.split('%')[0]!)) return { kind: 'unsupported', reason: `"${decoded.slice(0, 100)}" is not a host name` };
  return { kind: 'remote', scheme, host: decoded, port };
}

/** The host names that mean this machine whatever DNS says. */
export const isLocalHostName = (host: string): boolean => host === 'localhost' || host.endsWith('.localhost');

/**
 * An IPv4 address as inet_aton (and so ssh, curl and getaddrinfo) reads it: one to four parts,
 * each decimal, octal (leading 0) or hex (0x), the last filling the remaining bytes. null: not IPv4.
 */
export function parseIPv4(text: string): number | null {
  const parts = text.split('.');
  if (parts.length > 4) return null;
  const values: number[] = [];
  for (const part of parts) {
    let value: number;
    if (/^0x[0-9a-f]*$/i.test(part)) value = part.length === 2 ? 0 : parseInt(part.slice(2), 16);
    else if (/^0[0-7]*$/.test(part)) value = parseInt(part, 8);
    else if (/^[1-9][0-9]*$/.test(part)) value = Number(part);
    else return null;
    if (!Number.isSafeInteger(value)) return null;
    values.push(value);
  }
  const last = values.pop()!;
  if (values.some((v) => v > 255) || last >= 256 ** (4 - values.length)) return null;
  return values.reduce((sum, v, i) => sum + v * 256 ** (3 - i), 0) + last;
}

const inV4 = (address: number, base: string, bits: number): boolean => {
  const start = parseIPv4(base)!;
  const size = 2 ** (32 - bits);
  return address >= start && address < start + size;
};

const PRIVATE_V4: [string, number][] = [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['224.0.0.0', 4], ['240.0.0.0', 4],
];

export const isPrivateIPv4 = (address: number): boolean => PRIVATE_V4.some(([base, bits]) => inV4(address, base, bits));

/** The 16 bytes of an IPv6 address (zone id dropped); null when it is not one. */
export function parseIPv6(text: string): number[] | null {
  const address = text.split('%')[0]!;
  if (!isIPv6(address)) return null;
  let groups = address;
  const tail: number[] = [];
  const dotted = /:(\d+\.\d+\.\d+\.\d+)$/.exec(address);
  if (dotted) {
    const v4 = parseIPv4(dotted[1]!)!;
    tail.push(v4 >>> 16, v4 & 0xffff);
    const before = address.slice(0, dotted.index);
    groups = before.endsWith(':') ? `${before}:` : before; // "::1.2.3.4" leaves ":", which means "::"
  }
  const [head = '', rest] = groups.split('::');
  const words = (s: string) => (s === '' ? [] : s.split(':').map((w) => parseInt(w, 16)));
  const left = words(head);
  const right = rest === undefined ? [] : words(rest);
  const missing = 8 - tail.length - left.length - right.length;
  const all = [...left, ...Array<number>(rest === undefined ? 0 : missing).fill(0), ...right, ...tail];
  if (all.length !== 8) return null;
  return all.flatMap((w) => [w >> 8, w & 0xff]);
}

const v4At = (bytes: number[], at: number): number => ((bytes[at]! << 24) >>> 0) + (bytes[at + 1]! << 16) + (bytes[at + 2]! << 8) + bytes[at + 3]!;
const zero = (bytes: number[], from: number, to: number): boolean => bytes.slice(from, to).every((b) => b === 0);

export function isPrivateIPv6(bytes: number[]): boolean {
  const word0 = (bytes[0]! << 8) | bytes[1]!;
  // ::/96 (unspecified, loopback, IPv4-compatible) and ::ffff:0:0/96 (IPv4-mapped): the IPv4 address decides.
  if (zero(bytes, 0, 10) && ((bytes[10] === 0 && bytes[11] === 0) || (bytes[10] === 0xff && bytes[11] === 0xff))) return isPrivateIPv4(v4At(bytes, 12));
  if (word0 === 0x0064 && bytes[2] === 0xff && bytes[3] === 0x9b) return zero(bytes, 4, 12) ? isPrivateIPv4(v4At(bytes, 12)) : true; // NAT64, local-use NAT64
  if (word0 === 0x2002) return isPrivateIPv4(v4At(bytes, 2)); // 6to4
  if ((word0 & 0xfe00) === 0xfc00) return true; // unique local
  if ((word0 & 0xffc0) === 0xfe80 || (word0 & 0xffc0) === 0xfec0) return true; // link-local, site-local
  if ((word0 & 0xff00) === 0xff00) return true; // multicast
  if (word0 === 0x0100 && zero(bytes, 2, 8)) return true; // discard-only
  return false;
}

/** An address literal as a resolver returns it, or as written in a URL. undefined: not an address literal. */
export function isPrivateAddress(text: string): boolean | undefined {
  const v4 = parseIPv4(text);
  if (v4 !== null) return isPrivateIPv4(v4);
  const v6 = parseIPv6(text);
  return v6 === null ? undefined : isPrivateIPv6(v6);
}
