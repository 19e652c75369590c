// Builds sent to remote machines (worker.build.builders, docs/builds.md "Build servers"): Nix's
// own remote building. The build step runs with `--builders <line> --max-jobs 0`, so Nix copies
// the inputs to the machine over SSH (`nix-store --serve --write`), builds there and copies the
// outputs back into this worker's store, from where the worker pushes them as after a local
// build. Nothing is ever built here: a machine that cannot be reached fails the attempt.
import { jobFailure, type JobFailure } from '../protocol/index.js';

/** What the build step adds to `nix-store --realise`: the machines and no local build slot. */
export function remoteBuildArgs(builders: string | null): string[] {
  return builders === null ? ['--max-jobs', '1'] : ['--max-jobs', '0', '--builders', builders];
}

/**
 * The failure of a build step whose machine could not be used, or undefined when the failure is
 * the build's own. With --max-jobs 0 Nix ends such a step with "unable to start any build", which
 * would otherwise read as missing inputs; the connection's error is what matters.
 */
export function remoteBuilderFailure(errorText: string): JobFailure | undefined {
  if (/Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED/.test(errorText)) {
    return jobFailure('network',
      'the build server\'s host key is not the one kiln pinned at its last check-connection, so kiln refuses to build there '
      + '(ssh: Host key verification failed). If the key changed on purpose, an admin of the organization accepts the new one '
      + 'with POST /api/v1/servers/{org}/{server}/check-connection.');
  }
  const refused = /cannot build on '([^']*)': (?:error: )?([^\n]*)/.exec(errorText);
  if (refused) return jobFailure('network', `the build server ${refused[1]} could not be used: ${refused[2]!.replace(/\r/g, '').trim()}`);
  return undefined;
}
