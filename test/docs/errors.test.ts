// docs/errors.md against the registry (protocol/api/errorCodes.ts), in both directions, and the
// codes the spec names against the registry.
import t from 'tap';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { errorCodes, isErrorCode } from '../../protocol/index.js';

const docsFile = new URL('../../docs/errors.md', import.meta.url);

// The contract lives beside the repository (../shared/spec; CI lays a copy of shared/ beside its
// clone); KILN_SPEC_DIR points elsewhere. A missing spec is a failure, never a skip.
const specCandidates = [
  ...(process.env['KILN_SPEC_DIR'] ? [pathToFileURL(`${process.env['KILN_SPEC_DIR']}/http-api.md`)] : []),
  new URL('../../../shared/spec/http-api.md', import.meta.url),
  pathToFileURL(`${process.cwd()}/../shared/spec/http-api.md`),
  new URL('file:///work/shared/spec/http-api.md'),
];

interface DocumentedCode { status: number; meaning: string }

function documentedCodes(text: string): Map<string, DocumentedCode> {
  const rows = new Map<string, DocumentedCode>();
  for (const line of text.split('\n')) {
    const row = /^\| ([a-z_]+) \| (\d{3}) \| (.+) \|$/.exec(line);
    if (row) rows.set(row[1]!, { status: Number(row[2]), meaning: row[3]! });
  }
  return rows;
}

/** Codes the spec's Errors section names: "403, identifier forbidden_source_ip", "403 forbidden_source_ip". */
function specCodes(text: string): Set<string> {
  const codes = new Set<string>();
  for (const m of text.matchAll(/identifiers? ([a-z]+(?:_[a-z]+)+)/g)) codes.add(m[1]!);
  for (const m of text.matchAll(/\b\d{3},? ([a-z]+(?:_[a-z]+)+)\b/g)) codes.add(m[1]!);
  return codes;
}

t.test('docs/errors.md lists every code of the registry with its status and meaning', async (t) => {
  const documented = documentedCodes(readFileSync(docsFile, 'utf8'));
  for (const [code, { status, meaning }] of Object.entries(errorCodes)) {
    const row = documented.get(code);
    if (!row) {
      t.fail(`${code} is missing from docs/errors.md; add: | ${code} | ${status} | ${meaning} |`);
      continue;
    }
    t.equal(row.status, status, `${code}: docs/errors.md says ${row.status}, the registry ${status}`);
    t.equal(row.meaning, meaning, `${code}: the meaning in docs/errors.md is the registry's`);
  }
});

t.test('every code docs/errors.md lists is in the registry', async (t) => {
  const documented = documentedCodes(readFileSync(docsFile, 'utf8'));
  t.ok(documented.size > 0, 'docs/errors.md has a table of codes');
  for (const code of documented.keys()) t.ok(isErrorCode(code), `${code} (docs/errors.md) is declared in protocol/api/errorCodes.ts`);
});

t.test('every code the spec names is in the registry', async (t) => {
  const specFile = specCandidates.find((u) => existsSync(u));
  if (!specFile) {
    t.fail(`spec/http-api.md is in none of: ${specCandidates.map((u) => fileURLToPath(u)).join(', ')}; set KILN_SPEC_DIR`);
    return;
  }
  const named = specCodes(readFileSync(specFile, 'utf8'));
  t.ok(named.has('forbidden_source_ip'), 'the spec names forbidden_source_ip (the reader of the spec still works)');
  for (const code of named) t.ok(isErrorCode(code), `${code} (spec) is declared in protocol/api/errorCodes.ts`);
});

t.test('every code of the registry is still thrown somewhere', async (t) => {
  const root = fileURLToPath(new URL('../..', import.meta.url));
  let source = '';
  for (const folder of ['protocol', 'config', 'storage', 'actors', 'supervisors', 'services', 'http', 'cli', 'worker']) {
    for (const entry of readdirSync(`${root}${folder}`, { recursive: true, withFileTypes: true })) {
      if (entry.isFile() && entry.name.endsWith('.ts') && entry.name !== 'errorCodes.ts') source += readFileSync(`${entry.parentPath}/${entry.name}`, 'utf8');
    }
  }
  for (const code of Object.keys(errorCodes)) t.ok(source.includes(`'${code}'`), `${code} appears in the source outside the registry`);
});
