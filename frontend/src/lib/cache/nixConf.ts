// What a Nix user adds to nix.conf (and netrc, for a private cache) to substitute from a cache.
import type { CacheView } from '$protocol/api/caches';

/**
 * extra-… lines keep the substituters and keys a user already has (cache.nixos.org), which plain
 * `substituters =` would replace.
 */
export function nixConfLines(cache: Pick<CacheView, 'url' | 'public_key' | 'public'>): string {
  const lines = [`extra-substituters = ${cache.url}`, `extra-trusted-public-keys = ${cache.public_key}`];
  if (!cache.public) lines.push('netrc-file = /etc/nix/netrc');
  return lines.join('\n') + '\n';
}

/** A private cache takes HTTP Basic with any user name and an API key (or session token) as the password. */
export function netrcLine(cache: Pick<CacheView, 'url'>): string {
  return `machine ${new URL(cache.url).hostname} login kiln password <API key with viewCache>\n`;
}
