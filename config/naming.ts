/**
 * Names derived from an option path: SERVICE_ + upper snake case for the environment, kebab case
 * for flags. Flags belong to their subcommand: server options are flags of `kiln serve`;
 * worker.* options are flags of `kiln worker` without the `worker.` prefix, so the two never collide.
 */
export type Scope = 'server' | 'worker';

export const envPrefix = 'SERVICE_';

export function scopeOf(path: string): Scope {
  return path.startsWith('worker.') ? 'worker' : 'server';
}

/** `worker.build.maxConcurrent` → ['worker', 'build', 'max', 'concurrent']; `reverseProxy.proxyA` → […, 'proxy', 'a']. */
function words(path: string): string[] {
  return path
    .split('.')
    .flatMap((segment) => segment.replace(/([a-z0-9])([A-Z])/g, '$1 $2').split(' '))
    .map((word) => word.toLowerCase());
}

export function envName(path: string): string {
  return envPrefix + words(path).join('_').toUpperCase();
}

export function flagName(path: string): string {
  const local = scopeOf(path) === 'worker' ? path.slice('worker.'.length) : path;
  return `--${words(local).join('-')}`;
}

export function commandOf(scope: Scope): string {
  return scope === 'server' ? 'kiln serve' : 'kiln worker';
}
