// What the `nix copy` benches share (nixCopy.bench.ts over HTTP, sshCopy.bench.ts over SSH): a
// child process's stdout without blocking the bench's own event loop (kiln answers Nix from it),
// and the synthetic closure they copy: leaves of a few bytes to ~100 KB, groups of ten leaves
// that refer to them, and one root.
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';

const GROUP = 10;

/** Runs `command` and resolves with its stdout; a non-zero exit rejects with the end of its stderr. */
export function commandOutput(command: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: { ...process.env, NIX_REMOTE: 'local', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`${command} ${args.join(' ')} exited ${code}:\n${err.slice(-3000)}`))));
  });
}

const closureNix = (count: number) => String.raw`
let
  mk = name: script: derivation { inherit name; builder = "/bin/sh"; args = [ "-c" script ]; PATH = "/bin:/usr/bin"; system = builtins.currentSystem; };
  leaf = i: mk "kiln-bench-leaf-${'${toString i}'}" "mkdir -p $out/share; seq 1 ${'${toString (i * i)}'} > $out/share/numbers; echo leaf ${'${toString i}'} > $out/name";
  leaves = builtins.genList leaf ${count};
  group = g: mk "kiln-bench-group-${'${toString g}'}" (builtins.concatStringsSep "; " ([ "mkdir $out" ] ++ map (l: "echo ${'${l}'} >> $out/deps") (builtins.genList (j: builtins.elemAt leaves (g * ${GROUP} + j)) ${GROUP})));
  groups = builtins.genList group (${count} / ${GROUP});
in mk "kiln-bench-root" (builtins.concatStringsSep "; " ([ "mkdir $out" ] ++ map (g: "echo ${'${g}'} >> $out/deps") groups))
`;

/** Builds the closure of `leaves` leaves in the local store (`nixOptions` on each Nix command); its root and paths. */
export async function buildBenchClosure(work: string, leaves: number, nixOptions: string[]): Promise<{ root: string; closure: string[] }> {
  const expression = join(work, 'closure.nix');
  await writeFile(expression, closureNix(leaves));
  console.error('building the closure with nix-build');
  const root = (await commandOutput('nix-build', [...nixOptions, expression, '--no-out-link', '--max-jobs', '2'])).trim();
  const closure = (await commandOutput('nix-store', [...nixOptions, '-qR', root])).trim().split('\n');
  console.error(`closure of ${root}: ${closure.length} paths`);
  return { root, closure };
}
