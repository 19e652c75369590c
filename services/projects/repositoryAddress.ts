// Where a git repository URL points, read the way git itself reads it: a local path or file://
// URL, a host (https://, ssh://, git://, scp-like `user@host:path`), or a transport kiln does not
// speak (`<helper>::…`, unknown schemes). And whether an address is one a tenant must not reach:
// loopback, private, link-local, unspecified, multicast or reserved, in every spelling the
// resolvers accept (decimal, octal, hex and short IPv4; IPv4 inside IPv6).
// The ranges themselves are protocol/net's (nonPublicRange), shared with outbound destinations.
import { isIPv6 } from 'node:net';
import { nonPublicRange } from '../../protocol/index.js';

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

/** An address literal as a resolver returns it, or as written in a URL. undefined: not an address literal. */
export function isPrivateAddress(text: string): boolean | undefined {
  // The spelling is git's (inet_aton's); which ranges are not public is protocol/net's, as for outbound URLs.
  const v4 = parseIPv4(text);
  if (v4 !== null) return nonPublicRange([v4 >>> 24, (v4 >>> 16) & 0xff, (v4 >>> 8) & 0xff, v4 & 0xff].join('.')) !== null;
  return isIPv6(text.split('%')[0]!) ? nonPublicRange(text) !== null : undefined;
}
