// docs/proto.md and protocol/proto must name the same reject codes, failure reasons and messages.
import t from 'tap';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { FAILURE_REASONS, MESSAGE_TYPES, REJECT_CODES } from '../../../protocol/index.js';

const doc = await readFile(fileURLToPath(new URL('../../../docs/proto.md', import.meta.url)), 'utf8');
const rows = (pattern: RegExp) => new Map([...doc.matchAll(pattern)].map((m) => [m[1]!, m[2]!]));

t.test('reject codes, with their close codes', async (t) => {
  const documented = rows(/^\| ([a-z_]+) \| (\d{4}) \|/gm);
  t.same(Object.fromEntries(documented), Object.fromEntries(Object.entries(REJECT_CODES).map(([code, close]) => [code, String(close)])));
});

t.test('failure reasons, with their classes', async (t) => {
  const documented = rows(/^\| ([a-z_]+) \| (Failed[A-Za-z]+) \|/gm);
  t.same(Object.fromEntries(documented), FAILURE_REASONS);
});

t.test('every message type is described', async (t) => {
  for (const type of MESSAGE_TYPES) t.match(doc, new RegExp(`\\b${type}\\b`), type);
});
