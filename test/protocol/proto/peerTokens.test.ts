import t from 'tap';
import { MAX_TOKENS_PER_PROJECT, parsePeersFile, tokensForChallenge } from '../../../protocol/index.js';

const a = '0b7f6c8e-2f47-4a38-9d1d-3c6b1c2f9a10';
const b = '5a1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0';
const token = (n: number) => `token-${String(n).padStart(16, '0')}`;

t.test('lines, comments, * and the order of tokens', async (t) => {
  const parsed = parsePeersFile(`# comment\n\n${a.toUpperCase()}:${token(1)}\r\n  *:${token(2)}  \n${a}:${token(1)}\n${a}:${token(3)}\n`);
  t.ok(parsed.ok);
  if (!parsed.ok) return;
  t.same(parsed.value.byProject.get(a), [token(1), token(3)], 'UUIDs are lower-cased and tokens de-duplicated');
  t.same(parsed.value.any, [token(2)]);
  t.same(tokensForChallenge(parsed.value, [a, b, a]), [
    { project: a, token: token(1) }, { project: a, token: token(3) }, { project: a, token: token(2) }, { project: b, token: token(2) },
  ], 'own lines first, then *; each project once');
});

t.test('at most MAX_TOKENS_PER_PROJECT tokens per project', async (t) => {
  const lines = Array.from({ length: 10 }, (_, i) => `${a}:${token(i)}`).join('\n');
  const parsed = parsePeersFile(lines);
  t.ok(parsed.ok);
  if (parsed.ok) t.equal(tokensForChallenge(parsed.value, [a]).length, MAX_TOKENS_PER_PROJECT);
});

t.test('bad lines name the line, never the token', async (t) => {
  const secret = 'Sup3rSecretTokenValue';
  const cases: [string, RegExp][] = [
    [`${secret}`, /expected "<project uuid>:<token>"/],
    [`not-a-uuid:${secret}`, /"not-a-uuid" is neither a project UUID nor \*/],
    [`${a}:short`, /16 to 256 characters/],
    [`${a}:has space${secret}`, /16 to 256 characters/],
  ];
  for (const [line, reason] of cases) {
    const parsed = parsePeersFile(`# first\n${line}\n`);
    t.match(parsed, { ok: false, field: 'line 2', reason }, line.slice(0, 20));
    if (!parsed.ok) t.notMatch(parsed.reason, secret, 'the token is not in the message');
  }
});
