// The Nix commands the worker runs. Nix 2.8 still gates `nix …` and flakes behind experimental
// features; newer Nix accepts the same flag. Everything else (store, sandbox, substituters) comes
// from Nix's own configuration and the child environment (NIX_CONFIG, NIX_REMOTE), not from kiln.
import { runCommand, type RunOptions, type RunResult } from './childProcess.js';
import { storeConnections } from './storeConnections.js';

/** Paths per call, far below the kernel's argument limit (a push job may name 100,000). */
export const PATHS_PER_CALL = 500;

export const NIX_FEATURE_ARGS = ['--extra-experimental-features', 'nix-command flakes'] as const;

/**
 * Every evaluation of a tenant's expression. Pure mode: no file outside the store and the flake's
 * own sources (`builtins.readFile /etc/…` fails), `builtins.getEnv` is "", no `<nixpkgs>` lookup, no
 * unlocked fetch. Expressions go in with `--expr`: Nix 2.8's `nix eval --file` turns pure mode off
 * even with this option (`--expr` is pure by default; the option says so explicitly).
 */
export const PURE_EVAL_ARGS = ['--option', 'pure-eval', 'true'] as const;

/** `nix …`, holding one of the worker's store connections while it runs (worker/storeConnections.ts). */
export const nix = (args: readonly string[], options: RunOptions): Promise<RunResult> => storeConnections.hold(() => runCommand('nix', [...NIX_FEATURE_ARGS, ...args], options));

export const nixStore = (args: readonly string[], options: RunOptions): Promise<RunResult> => storeConnections.hold(() => runCommand('nix-store', args, options));

/** The last error Nix printed, without colours or its "error: " prefix, for a failure message. */
export function nixErrorText(stderr: string): string {
  const text = stderr.replace(/\u001b\[[0-9;]*[A-Za-z]/g, '').trim();
  const start = text.lastIndexOf('error:');
  return (start === -1 ? text : text.slice(start + 'error:'.length)).trim() || 'Nix failed without a message';
}

/** Whether every path is valid in the local store (`nix-store --check-validity` exits 0). */
export async function allValid(paths: readonly string[], options: RunOptions): Promise<boolean> {
  for (let i = 0; i < paths.length; i += PATHS_PER_CALL) {
    const result = await nixStore(['--check-validity', ...paths.slice(i, i + PATHS_PER_CALL)], { ...options, collectStdout: false });
    if (result.exitCode !== 0) return false;
  }
  return true;
}

/** The paths valid in the local store, in the order given (`nix-store --check-validity --print-invalid`). */
export async function validOf(paths: readonly string[], options: RunOptions): Promise<string[]> {
  if (paths.length === 0) return [];
  const result = await nixStore(['--check-validity', '--print-invalid', ...paths], options);
  if (result.exitCode !== 0) throw new Error(`nix-store --check-validity failed: ${nixErrorText(result.stderr)}`);
  const invalid = new Set(result.stdout.split('\n').filter((line) => line !== ''));
  return paths.filter((path) => !invalid.has(path));
}
