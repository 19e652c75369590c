// Real Nix as a test oracle: builds a few small store paths with nix-build and wraps the Nix
// commands the tests compare against (nix-store --dump, nix path-info, nix copy, nix key,
// nix store verify). Runs against the real /nix/store with NIX_REMOTE=local, no sandbox and no
// substituters, so it needs root and Debian's nix-bin, and nothing from the network.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const NIX_OPTIONS = [
  '--option', 'sandbox', 'false',
  '--option', 'build-users-group', '',
  '--option', 'substituters', '',
];

const INSTALL_HINT =
  'These tests use real Nix as their oracle. Install it with `apt-get install nix-bin` (Debian, Nix 2.8 or later) ' +
  'and run the tests as root (they set NIX_REMOTE=local and build without a sandbox).';

export const nixEnv = (): NodeJS.ProcessEnv => ({ ...process.env, NIX_REMOTE: 'local' });

/** Whether nix-build, nix-store and nix are usable here, and if not, what to do about it. */
export function nixAvailable(): { ok: true; version: string } | { ok: false; reason: string } {
  const probe = spawnSync('nix', ['--version'], { env: nixEnv(), encoding: 'utf8' });
  if (probe.error || probe.status !== 0) return { ok: false, reason: `\`nix --version\` failed (${probe.error?.message ?? probe.stderr.trim()}). ${INSTALL_HINT}` };
  if (typeof process.getuid === 'function' && process.getuid() !== 0) return { ok: false, reason: `not running as root. ${INSTALL_HINT}` };
  return { ok: true, version: probe.stdout.trim() };
}

/** Throws with the install hint when Nix is missing, so a test run fails loudly instead of skipping. */
export function requireNix(): void {
  const available = nixAvailable();
  if (!available.ok) throw new Error(available.reason);
}

function run(command: string, args: string[], input?: string | Buffer): Buffer {
  try {
    return execFileSync(command, args, { env: nixEnv(), input, maxBuffer: 1 << 30, stdio: ['pipe', 'pipe', 'pipe'] });
  } catch (e) {
    const err = e as { stderr?: Buffer; message: string };
    throw new Error(`${command} ${args.join(' ')} failed: ${err.stderr?.toString().trim() || err.message}`, { cause: e });
  }
}

/** `nix` with the nix-command feature Nix 2.8 still gates. */
export const nix = (args: string[], input?: string): string =>
  run('nix', ['--extra-experimental-features', 'nix-command', ...NIX_OPTIONS, ...args], input).toString('utf8');

export const nixStoreDump = (path: string): Buffer => run('nix-store', ['--dump', path]);

export interface NixPathInfo {
  path: string;
  narHash: string;
  narSize: number;
  references: string[];
  deriver?: string;
  ca?: string;
}

export function nixPathInfo(path: string): NixPathInfo {
  const [info] = JSON.parse(nix(['path-info', '--json', path])) as NixPathInfo[];
  if (!info) throw new Error(`nix path-info printed nothing for ${path}`);
  return info;
}

/** A fresh secret key from `nix key generate-secret`, with its public key. */
export function nixGenerateKey(name: string): { secret: string; public: string } {
  const secret = nix(['key', 'generate-secret', '--key-name', name]);
  return { secret, public: nix(['key', 'convert-secret-to-public'], secret).trim() };
}

/** `nix copy --to file://dir?…` with the given store parameters; returns the cache directory. */
export function nixCopyToFileCache(dir: string, paths: string[], params: Record<string, string>): string {
  const query = new URLSearchParams(params).toString().replace(/%2F/g, '/');
  nix(['copy', '--to', `file://${dir}?${query}`, ...paths]);
  return dir;
}

/** Runs `nix store verify` against a file:// cache; returns Nix's exit status and output. */
export function nixVerifyInCache(dir: string, paths: string[], trustedPublicKey: string): { status: number; output: string } {
  const result = spawnSync(
    'nix',
    ['--extra-experimental-features', 'nix-command', ...NIX_OPTIONS, '--option', 'trusted-public-keys', trustedPublicKey,
      'store', 'verify', '--store', `file://${dir}`, ...paths],
    { env: nixEnv(), encoding: 'utf8' },
  );
  return { status: result.status ?? -1, output: `${result.stdout}${result.stderr}` };
}

export interface FixturePaths {
  /** A regular file "hello\n". */
  file: string;
  /** An executable regular file as the root. */
  executable: string;
  /** An empty regular file as the root. */
  empty: string;
  /** A symlink as the root. */
  symlink: string;
  /** Nested directories, executables, symlinks, empty file and directory, unicode and control-character names, a 160 kB file. */
  tree: string;
  /** Refers to `file` and to itself. */
  refs: string;
}

const FIXTURES_NIX = String.raw`
let
  mk = name: script: derivation {
    inherit name;
    builder = "/bin/sh";
    args = [ "-c" script ];
    PATH = "/bin:/usr/bin";
    system = builtins.currentSystem;
  };
in rec {
  file = mk "kiln-fixture-file" "echo hello > $out";
  executable = mk "kiln-fixture-executable" "printf '#!/bin/sh\\necho run\\n' > $out; chmod +x $out";
  empty = mk "kiln-fixture-empty" ": > $out";
  symlink = mk "kiln-fixture-symlink" "ln -s ../somewhere/else $out";
  tree = mk "kiln-fixture-tree" ''
    mkdir -p $out/bin $out/share/doc/deep/er $out/empty-dir $out/numbers
    printf '#!/bin/sh\necho hi\n' > $out/bin/hello; chmod +x $out/bin/hello
    : > $out/empty-file
    : > $out/bin/empty-exec; chmod +x $out/bin/empty-exec
    echo ünïcødé > "$out/share/ünïcødé ✓.txt"
    echo emoji > "$out/share/📦"
    echo private-use > "$out/share/${'\uE000'}"
    printf 'a"b\\c\n' > $out/share/doc/deep/er/f
    ln -s ../bin/hello $out/share/link
    ln -s "tárget with \"quote\"" $out/share/odd-link
    echo x > "$out/share/tab	name"
    echo y > "$out/share/$(printf 'ctl\001\010\177x')"
    echo z > $out/share/__proto__
    for n in 1 2 9 10 100; do echo $n > $out/numbers/$n; done
    seq 1 30000 > $out/share/big.txt
  '';
  refs = mk "kiln-fixture-refs" "mkdir $out; echo ${'${'}file} > $out/dep; echo $out > $out/self";
}
`;

const FIXTURE_NAMES: (keyof FixturePaths)[] = ['file', 'executable', 'empty', 'symlink', 'tree', 'refs'];

/**
 * Builds the fixture store paths (instant when they are already valid) from a Nix file written
 * to a temporary directory. Store paths depend only on the derivations, so every test file
 * gets the same paths; concurrent builds are serialised by Nix's own path locks.
 */
export function buildFixturePaths(): FixturePaths {
  requireNix();
  const dir = mkdtempSync(join(tmpdir(), 'kiln-nix-fixtures-'));
  try {
    const file = join(dir, 'fixtures.nix');
    writeFileSync(file, FIXTURES_NIX);
    const args = [file, '--no-out-link', ...NIX_OPTIONS, ...FIXTURE_NAMES.flatMap((name) => ['-A', name])];
    const paths = run('nix-build', args).toString('utf8').trim().split('\n');
    if (paths.length !== FIXTURE_NAMES.length) throw new Error(`nix-build printed ${paths.length} paths, expected ${FIXTURE_NAMES.length}: ${paths.join(' ')}`);
    return Object.fromEntries(FIXTURE_NAMES.map((name, i) => [name, paths[i]!])) as unknown as FixturePaths;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `nix-store --add` of a directory: a content-addressed path whose narinfo has a CA line. */
export function nixStoreAdd(path: string): string {
  return run('nix-store', ['--add', path]).toString('utf8').trim();
}

/** A temporary directory removed when the process exits. */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
