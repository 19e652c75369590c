// The declaration of one option: kind, default, bounds, mask and documentation.
import type { Kind } from './kinds.js';

/**
 * How `kiln config print` and error messages show a value that is or holds a secret.
 * - `all`: nothing of it is shown.
 * - `urlPassword`: the password of a URL (and a `password=` query parameter) is hidden.
 * - `urlUserinfo`: user and password of a URL are hidden (an error-report DSN's key is its user).
 * - `partial`: the first 4 characters stay, so an operator can tell which key is in use.
 * - `attrValues`: an attribute set shows its names only (extra environment variables may hold tokens).
 * `…File` options hold paths, which are not secret and are shown.
 */
export type Mask = 'none' | 'all' | 'urlPassword' | 'urlUserinfo' | 'partial' | 'attrValues';

/** A default computed from other options; the computation is in derived.ts, keyed by path. */
export class DerivedDefault {
  constructor(readonly how: string) {}
}
export const derived = (how: string): DerivedDefault => new DerivedDefault(how);

export interface Option<T> extends Kind<T> {
  readonly default: T | DerivedDefault;
  /** What the option does, in the spec's words. */
  readonly meaning: string;
  /** Whether SERVICE_<PATH> is read (spec column Env). */
  readonly env: boolean;
  readonly mask: Mask;
  /** Not in spec/configuration.md: kiln needs it; listed in docs/configuration.md. */
  readonly extension: boolean;
  /** Read by deployment tooling (packages, reverse proxies, firewall); kiln declares it and ignores it. */
  readonly deployment: boolean;
}

export interface OptionExtras {
  readonly env?: boolean;
  readonly mask?: Mask;
  readonly extension?: boolean;
  readonly deployment?: boolean;
}

export const noEnv: OptionExtras = { env: false };
export const deploymentOnly: OptionExtras = { env: false, deployment: true };

export function option<T>(kind: Kind<T>, fallback: NoInfer<T> | DerivedDefault, meaning: string, extras: OptionExtras = {}): Option<T> {
  return {
    ...kind,
    default: fallback,
    meaning,
    env: extras.env ?? true,
    mask: extras.mask ?? 'none',
    extension: extras.extension ?? false,
    deployment: extras.deployment ?? false,
  };
}
