// worker.acceptedServerTokensFile (configuration.md): the tokens a server must present to connect
// to a discoverable worker. One `peer_id:hash` per line, `#` comments; the hash is an argon2 PHC
// string or the lowercase SHA-256 hex digest of the token; peer id `*` matches any. A server
// presents `Authorization: Bearer <token>` and `X-Kiln-Peer: <its peer id>` (the project UUID
// that registered this worker) when it opens /proto here.
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import argon2 from 'argon2';

export interface AcceptedServerToken {
  peer: string;
  hash: string;
}

export type ParsedServerTokens = { ok: true; tokens: AcceptedServerToken[] } | { ok: false; line: number; reason: string };

const SHA256_HEX = /^[0-9a-f]{64}$/;

export function parseAcceptedServerTokens(text: string): ParsedServerTokens {
  const tokens: AcceptedServerToken[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (line === '' || line.startsWith('#')) continue;
    const colon = line.indexOf(':');
    if (colon <= 0) return { ok: false, line: i + 1, reason: 'expected peer_id:hash' };
    const peer = line.slice(0, colon);
    const hash = line.slice(colon + 1);
    if (peer !== '*' && !/^[0-9a-f-]{36}$/i.test(peer)) return { ok: false, line: i + 1, reason: `peer id "${peer.slice(0, 40)}" is neither a UUID nor *` };
    if (!SHA256_HEX.test(hash) && !hash.startsWith('$argon2')) return { ok: false, line: i + 1, reason: 'the hash is neither an argon2 PHC string nor a lowercase SHA-256 hex digest' };
    tokens.push({ peer: peer.toLowerCase(), hash });
  }
  return { ok: true, tokens };
}

export async function readAcceptedServerTokens(file: string): Promise<AcceptedServerToken[]> {
  const parsed = parseAcceptedServerTokens(await readFile(file, 'utf8'));
  if (!parsed.ok) throw new Error(`worker.acceptedServerTokensFile ${file}, line ${parsed.line}: ${parsed.reason}`);
  return parsed.tokens;
}

/** True when `token`, presented by `peer`, matches an entry for that peer or for `*`. */
export async function serverTokenAccepted(tokens: readonly AcceptedServerToken[], peer: string, token: string): Promise<boolean> {
  const digest = createHash('sha256').update(token).digest();
  for (const entry of tokens) {
    if (entry.peer !== '*' && entry.peer !== peer.toLowerCase()) continue;
    if (SHA256_HEX.test(entry.hash)) {
      if (timingSafeEqual(Buffer.from(entry.hash, 'hex'), digest)) return true;
    } else if (await argon2.verify(entry.hash, token).catch(() => false)) return true;
  }
  return false;
}
