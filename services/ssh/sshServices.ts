// The ssh domain as the composition root sees it: users' login keys (for /user/ssh-keys) and the
// SSH server, started by `kiln serve` when ssh.enable is set.
import type { Sql } from 'postgres';
import type { Config, Logger } from '../../config/index.js';
import type { Clock } from '../../supervisors/index.js';
import type { NarStorage, RateLimiter } from '../../storage/index.js';
import type { KeyUser } from '../access/index.js';
import type { NarIngest } from '../caches/index.js';
import { farmBuilds, type FarmBuildsDeps } from './farmBuilds.js';
import { NarLeases } from './narLeases.js';
import type { SshServer } from './sshServer.js';
import { userSshKeysService, type UserSshKeys } from './userSshKeys.js';

export interface SshServicesDeps {
  sql: Sql;
  config: Config;
  log: Logger;
  nars: NarStorage;
  /** the web pool's ingest front door, shared with `nix copy --to http://…` */
  ingest: NarIngest;
  authenticateApiKey(secret: string, peerAddress: string): Promise<KeyUser>;
  /** what upload.leaseIdleSecs is measured by */
  clock: Clock;
  /** password attempts per address (sshServer.ts SSH_PASSWORD_RATE) */
  rateLimiter: RateLimiter;
  /** direct builds, their views and live logs: where BuildPaths and BuildDerivation go */
  builds: Omit<FarmBuildsDeps, 'sql'>;
}

export interface SshServices {
  keys: UserSshKeys;
  /** Listens on ssh.listenAddresses:ssh.port with the host key of ssh.hostKeyFile (or baseDir's). */
  start(): Promise<SshServer>;
}

export function createSshServices(deps: SshServicesDeps): SshServices {
  const keys = userSshKeysService({ sql: deps.sql });
  return {
    keys,
    // The server and ssh2 are loaded only with ssh.enable (docs/operations.md, "Memory at rest").
    start: async () => {
      const [{ startSshServer }, { loadHostKey }] = await Promise.all([import('./sshServer.js'), import('./hostKey.js')]);
      return startSshServer({
        sql: deps.sql, log: deps.log, nars: deps.nars, ingest: deps.ingest, keys, maxUploadSize: deps.config['nar.maxUploadSize'],
        farm: farmBuilds({ sql: deps.sql, ...deps.builds }),
        clock: deps.clock, rateLimiter: deps.rateLimiter, loginGraceSecs: deps.config['ssh.loginGraceSecs'],
        idleTimeoutSecs: deps.config['ssh.idleTimeoutSecs'],
        maxSessionsPerUser: deps.config['ssh.maxSessionsPerUser'],
        leases: new NarLeases({ idleSecs: deps.config['upload.leaseIdleSecs'], clock: deps.clock }),
        hostKey: await loadHostKey(deps.config['ssh.hostKeyFile'], deps.config['baseDir']),
        authenticateApiKey: deps.authenticateApiKey,
        listenAddresses: deps.config['ssh.listenAddresses'],
        port: deps.config['ssh.port'],
      });
    },
  };
}
