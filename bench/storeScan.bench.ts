// What one look for new store paths costs `kiln watch-store` (docs/cli.md, "Pushing what Nix
// builds"): kiln's query of Nix's database (cli/storeScan.ts, nothing new since the last look)
// against the baseline of listing every valid path with `nix path-info --all` to diff it, on a
// store of STORE_PATHS paths made with builtins.toFile in a private store root (default 5,000).
// Run: npx tsx bench/storeScan.bench.ts
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { StoreScan } from '../cli/storeScan.js';

const count = Number(process.env['STORE_PATHS'] ?? 5000);
const root = mkdtempSync(join(tmpdir(), 'kiln-scan-bench-'));
const nixEnv = { ...process.env, NIX_REMOTE: '' };
execFileSync('nix-instantiate', ['--store', root, '--read-write-mode', '--option', 'substituters', '', '--eval', '--strict', '-E',
  `builtins.stringLength (builtins.concatStringsSep "" (map (i: builtins.toFile "f\${toString i}" (toString i)) (builtins.genList (x: x) ${count})))`], { env: nixEnv, stdio: 'ignore' });
const scan = await StoreScan.open(join(root, 'scan-state'), join(root, 'nix/var/nix/db/db.sqlite'));

const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const time = (f: () => void) => {
  const start = process.hrtime.bigint();
  f();
  return Number(process.hrtime.bigint() - start) / 1e6;
};
const rounds = 20;
const kiln: number[] = [];
const baseline: number[] = [];
let listed = 0;
for (let i = 0; i < rounds; i++) {
  kiln.push(time(() => scan.newPaths()));
  baseline.push(time(() => {
    listed = execFileSync('nix', ['--extra-experimental-features', 'nix-command', 'path-info', '--all', '--store', root], { env: nixEnv, maxBuffer: 1 << 28 }).toString().split('\n').length - 1;
  }));
}
scan.close();
rmSync(root, { recursive: true, force: true });
const k = median(kiln);
const b = median(baseline);
console.log(JSON.stringify({ paths: listed, rounds, kiln_ms: k, baseline_ms: b, ratio: k / b }));
