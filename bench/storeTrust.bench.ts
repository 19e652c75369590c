// What checking a build's input closure costs a worker (worker/storeTrust.ts; docs/builds.md, "The
// shared store"): a closure of ~330 paths (benchClosure.ts, LEAVES leaves, default 300) substituted
// from a signed file:// cache into the machine's store, then checked for a job that carries that
// cache: cold (a fresh worker: every signature verified), warm (the verdicts of an earlier job of
// the same scope), and a job trusting another cache that holds the same paths (a narinfo lookup per
// path). The baseline is the `nix path-info --recursive` the check starts with.
// Run: npx tsx bench/storeTrust.bench.ts
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SigningKey } from '../protocol/index.js';
import { StoreTrust } from '../worker/storeTrust.js';
import { buildBenchClosure } from './benchClosure.js';

const leaves = Number(process.env['LEAVES'] ?? 300);
const work = mkdtempSync(join(tmpdir(), 'kiln-trust-bench-'));
const env = { ...process.env, NIX_REMOTE: 'local', NIX_CONFIG: 'sandbox = false\nbuild-users-group =\nsubstituters =\n' };
const options = ['--option', 'sandbox', 'false', '--option', 'build-users-group', '', '--option', 'substituters', ''];
const nix = (args: string[]) => execFileSync('nix', ['--extra-experimental-features', 'nix-command', ...args], { env, maxBuffer: 1 << 28 }).toString();

function cache(name: string) {
  const key = SigningKey.generate(`bench-${name}`);
  writeFileSync(join(work, `${name}.sec`), key.toString());
  return { dir: join(work, name), key, url: `file://${join(work, name)}?secret-key=${join(work, `${name}.sec`)}` };
}

const { root, closure } = await buildBenchClosure(work, leaves, options);
const first = cache('first');
const second = cache('second');
nix(['copy', '--to', first.url, root]);
nix(['copy', '--to', second.url, root]);
execFileSync('nix-store', ['--delete', ...closure], { env, stdio: 'ignore' });
nix(['copy', '--from', `file://${first.dir}`, '--option', 'trusted-public-keys', first.key.publicKey.toString(), root]);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const time = async (f: () => Promise<unknown>) => {
  const start = process.hrtime.bigint();
  await f();
  return Number(process.hrtime.bigint() - start) / 1e6;
};
const run = { env };
const scopeOf = (c: ReturnType<typeof cache>) => ({ substituters: [{ url: `file://${c.dir}`, publicKeys: [c.key.publicKey.toString()] }] });
const rounds = 9;
const baseline: number[] = [];
const cold: number[] = [];
const warm: number[] = [];
const lookedUp: number[] = [];
for (let i = 0; i < rounds; i++) {
  baseline.push(await time(async () => nix(['path-info', '--json', '--sigs', '--recursive', root])));
  const trust = new StoreTrust(null, []);
  cold.push(await time(async () => {
    const verdict = await trust.check([root], scopeOf(first), run);
    if (verdict.rejected.length > 0) throw new Error('rejected');
  }));
  warm.push(await time(() => trust.check([root], scopeOf(first), run)));
  lookedUp.push(await time(async () => {
    const verdict = await new StoreTrust(null, []).check([root], scopeOf(second), run);
    if (verdict.rejected.length > 0 || verdict.lookedUp !== closure.length) throw new Error('not all looked up');
  }));
}
execFileSync('nix-store', ['--delete', ...closure], { env, stdio: 'ignore' });
rmSync(work, { recursive: true, force: true });
console.log(JSON.stringify({
  paths: closure.length, rounds, path_info_ms: median(baseline), cold_ms: median(cold), warm_ms: median(warm), narinfo_lookups_ms: median(lookedUp),
}));
