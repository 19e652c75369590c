// The option registry: every option of spec/configuration.md once, by path.
import type { Option } from './option.js';
import { accountOptions } from './options/accounts.js';
import { buildOptions } from './options/build.js';
import { cacheOptions } from './options/cache.js';
import { generalOptions } from './options/general.js';
import { networkOptions } from './options/network.js';
import { observabilityOptions } from './options/observability.js';
import { storageOptions } from './options/storage.js';
import { workerOptions } from './options/worker.js';
import { workerRuntimeOptions } from './options/workerRuntime.js';

/** Every option of spec/configuration.md, and kiln's extensions, declared once and keyed by path. */
export const registry = {
  ...generalOptions,
  ...networkOptions,
  ...storageOptions,
  ...cacheOptions,
  ...buildOptions,
  ...accountOptions,
  ...observabilityOptions,
  ...workerOptions,
  ...workerRuntimeOptions,
};

export type Registry = typeof registry;
export type OptionPath = keyof Registry;
export type ValueOf<P extends OptionPath> = Registry[P] extends Option<infer T> ? T : never;
/** The effective configuration: one frozen record, keyed by option path. */
export type Config = { readonly [P in OptionPath]: ValueOf<P> };

export const optionPaths: readonly OptionPath[] = Object.freeze(Object.keys(registry).filter(isOptionPath));

export function isOptionPath(path: string): path is OptionPath {
  return Object.hasOwn(registry, path);
}

/** The declaration of one option, seen without its value type (for code that walks every option). */
export function optionAt(path: OptionPath): Option<unknown> {
  return registry[path];
}
