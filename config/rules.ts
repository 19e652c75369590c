// Checks across options, run after loading.
import type { OptionPath, Config } from './registry.js';

/**
 * Rules across options, checked on the effective values: an enabled feature needs its settings.
 * Each names the option to fix and completes "must be …".
 */
export interface Rule {
  readonly path: OptionPath;
  readonly applies: (config: Config) => boolean;
  readonly holds: (config: Config) => boolean;
  readonly expected: string | ((config: Config) => string);
}

const isSet = (value: unknown) => value !== null && value !== '';

function required(path: OptionPath, when: OptionPath): Rule {
  return { path, applies: (c) => c[when] === true, holds: (c) => isSet(c[path]), expected: `set when ${when} is true` };
}

/** A Git host address kiln sends the application's tokens to, when the application is on and the address set. */
function gitHostAddress(path: 'gitHostApp.apiUrl' | 'gitHostApp.cloneUrl'): Rule {
  return {
    path,
    applies: (c) => c['gitHostApp.enable'] && c[path] !== null,
    holds: (c) => {
      try {
        const u = new URL(c[path]!);
        return u.hostname !== '' && u.username === '' && u.password === '' && u.search === '' && u.hash === '';
      } catch {
        return false;
      }
    },
    expected: 'an http(s) URL without user, password, query or fragment',
  };
}

/**
 * A feature this kiln does not have yet: the option is refused when turned on, never parsed and
 * silently ignored (docs/proto.md, "Federation").
 */
function unavailable(path: OptionPath, what: string): Rule {
  return { path, applies: (c) => c[path] === true, holds: () => false, expected: `false: ${what} is not available in this version of kiln (docs/proto.md, "Federation")` };
}

function atMost(path: OptionPath, limit: OptionPath): Rule {
  return {
    path,
    applies: () => true,
    holds: (c) => Number(c[path]) <= Number(c[limit]),
    expected: (c) => `at most ${limit} (${String(c[limit])})`,
  };
}

export const rules: readonly Rule[] = [
  required('s3.bucket', 's3.enable'),
  required('gitHostApp.id', 'gitHostApp.enable'),
  required('gitHostApp.privateKeyFile', 'gitHostApp.enable'),
  required('gitHostApp.webhookSecretFile', 'gitHostApp.enable'),
  // the app's tokens travel to these addresses: no credentials or query of their own to leak or confuse
  gitHostAddress('gitHostApp.apiUrl'),
  gitHostAddress('gitHostApp.cloneUrl'),
  required('oidc.clientId', 'oidc.enable'),
  required('oidc.clientSecretFile', 'oidc.enable'),
  required('oidc.discoveryUrl', 'oidc.enable'),
  required('scim.tokenFile', 'scim.enable'),
  // TLS needs both halves: a certificate without its key (or the reverse) is a mistake, not plain HTTP
  { path: 'tls.keyFile', applies: (c) => isSet(c['tls.certFile']), holds: (c) => isSet(c['tls.keyFile']), expected: 'set when tls.certFile is set' },
  { path: 'tls.certFile', applies: (c) => isSet(c['tls.keyFile']), holds: (c) => isSet(c['tls.certFile']), expected: 'set when tls.keyFile is set' },
  { path: 'oidc.enable', applies: (c) => c['oidc.required'], holds: (c) => c['oidc.enable'], expected: 'true when oidc.required is true' },
  {
    path: 'email.from.address',
    applies: (c) => c['email.enable'] && c['email.smtp.host'] !== null,
    holds: (c) => isSet(c['email.from.address']),
    expected: 'set when email.enable is true and email.smtp.host is set',
  },
  atMost('database.minConnections', 'database.maxConnections'),
  atMost('database.cache.minConnections', 'database.cache.maxConnections'),
  atMost('database.web.minConnections', 'database.web.maxConnections'),
  {
    path: 'worker.discoverable',
    applies: (c) => c['worker.capabilities.federate'],
    holds: (c) => c['worker.discoverable'],
    expected: 'true when worker.capabilities.federate is true (federation needs incoming connections)',
  },
  {
    path: 'useQuic',
    applies: (c) => c['useQuic'],
    holds: (c) => c['serveUrl'].startsWith('https://'),
    expected: 'false while serveUrl is not https:// (HTTP/3 runs over TLS only)',
  },
  unavailable('proto.federate', 'federation between servers over /proto'),
  unavailable('worker.capabilities.federate', 'forwarding work and NARs between workers and servers'),
];
