// Nix's `sandbox` setting, read at `kiln worker` start. Without the sandbox a build runs with the
// worker's own view of the file system: it can read other tenants' clones and scratch files under
// worker.baseDir when builds run as the worker's user (build-users-group empty), and write what
// it read into its outputs, which then go to its own caches. Multi-tenant workers need it on.
import { z } from 'zod';
import { nix } from './nixCli.js';

/** true, false or "relaxed"; undefined when Nix cannot say. */
export type SandboxMode = boolean | 'relaxed' | undefined;

const ShownSandbox = z.object({ sandbox: z.object({ value: z.union([z.boolean(), z.literal('relaxed')]) }) });

export async function nixSandboxMode(env: NodeJS.ProcessEnv): Promise<SandboxMode> {
  const result = await nix(['show-config', '--json'], { env });
  if (result.exitCode !== 0) return undefined;
  try {
    const parsed = ShownSandbox.safeParse(JSON.parse(result.stdout));
    return parsed.success ? parsed.data.sandbox.value : undefined;
  } catch {
    return undefined;
  }
}

/** The warning `kiln worker` logs at start, or undefined when the sandbox is on. */
export function sandboxWarning(mode: SandboxMode): string | undefined {
  if (mode === true) return undefined;
  if (mode === 'relaxed') return 'Nix\'s sandbox is "relaxed": fixed-output and __noChroot derivations build outside it and can read what this worker keeps for other tenants; set sandbox = true in nix.conf for a worker that builds for more than one tenant';
  if (mode === false) return 'Nix\'s sandbox is off (sandbox = false): builds can read what this worker keeps for other tenants (their clones, their scratch files) and put it into their outputs; set sandbox = true in nix.conf for a worker that builds for more than one tenant (docs/worker.md)';
  return 'could not read Nix\'s sandbox setting (nix show-config failed): make sure sandbox = true in nix.conf for a worker that builds for more than one tenant (docs/worker.md)';
}
