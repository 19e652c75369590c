// contentAddressClaim (protocol/nix/contentAddress.ts) against real Nix: for every kind of content
// address Nix writes (a text file with references, a recursive SHA-256 source, a flat file, a
// recursive SHA-1 tree), the path the claim computes is the one Nix chose; a claim whose hash or
// references were changed makes another path.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { contentAddressClaim, formatHash, parseHash } from '../../../protocol/index.js';
import { nixEnv, requireNix } from '../../support/nixStore.js';

requireNix();
const env = nixEnv();
const dir = mkdtempSync(join(tmpdir(), 'kiln-ca-claim-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const run = (command: string, args: string[]) => execFileSync(command, args, { env, encoding: 'utf8' }).trim();
const info = (path: string) => (JSON.parse(run('nix', ['--extra-experimental-features', 'nix-command', 'path-info', '--json', path])) as { ca: string; references: string[] }[])[0]!;
const nameOf = (path: string) => path.slice('/nix/store/'.length + 33);

const nonce = `${process.pid}-${Date.now()}`;
writeFileSync(join(dir, 'flat'), `flat ${nonce}\n`);
mkdirSync(join(dir, 'tree'));
writeFileSync(join(dir, 'tree', 'f'), `tree ${nonce}\n`);
const source = run('nix-store', ['--add-fixed', '--recursive', 'sha256', join(dir, 'tree')]);
const flat = run('nix-store', ['--add-fixed', 'sha256', join(dir, 'flat')]);
const sha1Tree = run('nix-store', ['--add-fixed', '--recursive', 'sha1', join(dir, 'tree')]);
const text = run('nix-instantiate', ['--read-write-mode', '--eval', '--expr', `builtins.toFile "kiln-claim-text" "see \${/. + "${source}"} ${nonce}"`]).replace(/"/g, '');

for (const [kind, path] of [['fixed:r:sha256 (a source)', source], ['fixed:sha256 (a flat file)', flat], ['fixed:r:sha1', sha1Tree], ['text, with a reference', text]] as const) {
  const { ca, references } = info(path);
  const claim = contentAddressClaim(ca, nameOf(path), references.filter((r) => r !== path), references.includes(path));
  t.equal(claim?.path, path, `${kind}: ${ca}`);
}

const { ca } = info(source);
const hash = parseHash(ca.slice('fixed:r:'.length));
if (!hash.ok) throw new Error('unreadable');
const other = formatHash({ ...hash.value, digest: hash.value.digest.map((b, i) => (i === 0 ? b ^ 1 : b)) });
t.not(contentAddressClaim(`fixed:r:${other}`, nameOf(source), [], false)?.path, source, 'another hash: another path');
t.not(contentAddressClaim(info(text).ca, nameOf(text), [], false)?.path, text, 'references left out: another path');
t.equal(contentAddressClaim('fixed:r:sha256:nonsense', 'x', [], false), undefined, 'an unreadable hash claims nothing');
t.equal(contentAddressClaim(`fixed:${other}`, 'x', [source], false), undefined, 'a flat file cannot have references');
