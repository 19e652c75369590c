// worker.peersFile: one `<project uuid>:<token>` or `*:<token>` per line, `#` comments. The
// worker answers a challenge with the tokens it holds for the challenged projects. Failures name
// the line, never the token.
import { parseFailure, parsedOk, type Parsed } from '../nix/parsed.js';
import { MAX_TOKENS_PER_PROJECT } from './limits.js';
import type { ProjectToken } from './handshakeMessages.js';

export interface PeerTokens {
  /** project UUID (lower case) → its tokens, in file order */
  readonly byProject: ReadonlyMap<string, readonly string[]>;
  /** `*` lines: tokens offered to every challenged project */
  readonly any: readonly string[];
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const TOKEN = /^[A-Za-z0-9_\-+/=.~]{16,256}$/;

export function parsePeersFile(text: string): Parsed<PeerTokens> {
  const byProject = new Map<string, string[]>();
  const any: string[] = [];
  const lines = text.split(/\r?\n/);
  for (const [index, raw] of lines.entries()) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const field = `line ${index + 1}`;
    const colon = line.indexOf(':');
    if (colon < 1) return parseFailure(field, 'expected "<project uuid>:<token>" or "*:<token>"');
    const peer = line.slice(0, colon).trim().toLowerCase();
    const token = line.slice(colon + 1).trim();
    if (peer !== '*' && !UUID.test(peer)) return parseFailure(field, `"${peer.slice(0, 40)}" is neither a project UUID nor *`);
    if (!TOKEN.test(token)) return parseFailure(field, 'the token must be 16 to 256 characters of base64url (as POST /projects/{project}/workers returned it)');
    const list = peer === '*' ? any : (byProject.get(peer) ?? byProject.set(peer, []).get(peer)!);
    if (!list.includes(token)) list.push(token);
  }
  return parsedOk({ byProject, any });
}

/** The tokens to answer a challenge with: a project's own lines first, then `*` lines, at most MAX_TOKENS_PER_PROJECT each. */
export function tokensForChallenge(peers: PeerTokens, projects: readonly string[]): ProjectToken[] {
  const answer: ProjectToken[] = [];
  for (const project of new Set(projects.map((p) => p.toLowerCase()))) {
    const tokens = [...new Set([...(peers.byProject.get(project) ?? []), ...peers.any])].slice(0, MAX_TOKENS_PER_PROJECT);
    for (const token of tokens) answer.push({ project, token });
  }
  return answer;
}
