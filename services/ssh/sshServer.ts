// kiln's SSH server (ssh.enable): ssh2's server on ssh.listenAddresses:ssh.port. A login is by a
// user's registered public key or by an API key given as the password; the SSH user name selects
// the cache (`ssh-ng://CACHE@kiln`), and the login acts there with the user's role (an API key:
// its permissions ∩ its owner's role, its pins), as at the binary cache paths. The one command
// served is `nix-daemon --stdio` (daemonSession.ts); shells and anything else are refused.
import { createServer, type Server as NetServer } from 'node:net';
import ssh2, { type AuthContext, type Connection, type ServerChannel } from 'ssh2';
import type { Logger } from '../../config/index.js';
import { accessOf, cacheTarget, findCache, type Principal } from '../access/index.js';
import type { KeyUser } from '../access/index.js';
import { serveDaemonSession, type DaemonSessionDeps, type SessionOutput } from './daemonSession.js';
import type { SessionStore } from './cachePaths.js';
import type { UserSshKeys } from './userSshKeys.js';
import type { Sql } from 'postgres';
import type { RateLimiter } from '../../storage/index.js';
import { ApiError, mappedIpv4, WireError } from '../../protocol/index.js';
import { SessionEnds, StoreRefusal } from './sessionErrors.js';
import { serveLegacySession } from './serveSession.js';
import { SshConnections, type SshConnection, type SshConnectionsDeps } from './sshConnections.js';

const { Server, utils } = ssh2;

/**
 * Password (API key) attempts per client address: the budget of the HTTP sign-in (20 at once,
 * one more every 3 s), in its own bucket family. A key login is not limited: it proves a private key.
 */
export const SSH_PASSWORD_RATE = { name: 'ssh.password', burst: 20, refillMs: 3_000 } as const;

export interface SshServerDeps extends DaemonSessionDeps, SshConnectionsDeps {
  sql: Sql;
  /** ssh.maxSessionsPerUser */
  maxSessionsPerUser: number;
  /** takes a token of SSH_PASSWORD_RATE before a password is checked */
  rateLimiter: RateLimiter;
  log: Logger;
  hostKey: Buffer;
  keys: Pick<UserSshKeys, 'ownerOf' | 'markUsed'>;
  /** an API key's principal as seen from `peerAddress`; throws when it is unknown, expired or not allowed from there */
  authenticateApiKey(secret: string, peerAddress: string): Promise<KeyUser>;
  listenAddresses: readonly string[];
  port: number;
}

export interface SshServer {
  /** the port listened on (the first address's, when ssh.port is 0) */
  readonly port: number;
  /** Drops connections past ssh.loginGraceSecs now (a timer does it too); how many. */
  sweepConnections(): number;
  close(): Promise<void>;
}

/**
 * The command Nix runs for `ssh-ng://` (remote-program defaults to nix-daemon; a path before it
 * is allowed). `--project ORG/PROJECT` (from `?remote-program=nix-daemon --project ORG/PROJECT`)
 * names the project builds go into when several write into the cache.
 */
const DAEMON_COMMAND = /^(?:\S*\/)?nix-daemon(?: --project[= ]([A-Za-z0-9][A-Za-z0-9_.-]{0,62}\/[A-Za-z0-9][A-Za-z0-9_.-]{0,62}))? --stdio$/;
/** The command Nix runs for `ssh://` (legacy-ssh-store.cc); `--write` lets it add paths. */
const SERVE_COMMAND = /^(?:\S*\/)?nix-store --serve( --write)?$/;

/** The cache `name` as `who` may use it over SSH, or null when it may not see it. */
export async function sessionStore(sql: Sql, who: Principal, name: string, project: string | null = null): Promise<SessionStore | null> {
  if (who.kind !== 'user') return null;
  const row = await findCache(sql, who, name);
  if (!row || !row.active) return null;
  const access = accessOf(who, cacheTarget(row));
  if (!access.visible) return null;
  return {
    who,
    project,
    cache: { id: row.id, name: row.name },
    canRead: access.permissions.has('viewCache') || row.public,
    writeTarget: access.permissions.has('writeStore') ? { id: row.id, name: row.name, uploader: who.username, owner: who.userId } : null,
  };
}

const noCache = (name: string) => `kiln has no cache "${name}" you may use (the SSH user name selects the cache: ssh-ng://CACHE@host)`;

function channelOutput(channel: ServerChannel): SessionOutput {
  return {
    write: (bytes) =>
      new Promise((resolve, reject) => {
        if (channel.destroyed) return reject(new WireError('the client went away'));
        if (channel.write(bytes)) return resolve();
        const done = () => {
          channel.off('close', gone);
          resolve();
        };
        const gone = () => {
          channel.off('drain', done);
          reject(new WireError('the client went away'));
        };
        channel.once('drain', done);
        channel.once('close', gone);
      }),
  };
}

export async function startSshServer(deps: SshServerDeps): Promise<SshServer> {
  const { log } = deps;

  const connections = new SshConnections(deps);
  /** running sessions (exec channels) by user id, for ssh.maxSessionsPerUser */
  const sessionsOf = new Map<string, number>();
  const onConnection = (client: Connection, peerAddress: string, connection: SshConnection | undefined) => {
    if (connection === undefined) {
      client.end(); // not accepted by kiln's own listener: cannot happen
      return;
    }
    let principal: Principal | null = null;
    /**
     * The login as it stands now: each session (exec) asks again, so a key deleted, an account
     * disabled or an API key revoked, expired or narrowed since the login takes effect on a
     * connection left open (a substituter's pool, an SSH ControlMaster), not only on the next one.
     */
    let current: () => Promise<Principal | null> = async () => null;
    let cacheName = '';
    client.on('authentication', (ctx: AuthContext) => {
      const refuse = () => ctx.reject(['publickey', 'password']);
      cacheName = ctx.username;
      if (ctx.method === 'publickey') {
        deps.keys.ownerOf(ctx.key.data).then((owner) => {
          if (owner === null) return refuse();
          if (ctx.signature === undefined) return ctx.accept(); // the client only asks whether the key would do
          const key = utils.parseKey(ctx.key.data);
          const parsed = Array.isArray(key) ? key[0] : key;
          if (parsed === undefined || parsed instanceof Error || ctx.blob === undefined || parsed.verify(ctx.blob, ctx.signature, ctx.hashAlgo) !== true) return refuse();
          principal = owner.user;
          const blob = ctx.key.data;
          current = async () => {
            const now = await deps.keys.ownerOf(blob);
            return now !== null && now.user.userId === owner.user.userId ? now.user : null;
          };
          connection.loggedIn(owner.user.userId);
          ctx.accept();
          deps.keys.markUsed(owner.keyId).catch((e: unknown) => log.warn({ err: e }, 'ssh: recording a login key\'s use failed'));
        }, (e: unknown) => {
          log.error({ err: e }, 'ssh: looking up a login key failed');
          refuse();
        });
      } else if (ctx.method === 'password') {
        deps.rateLimiter.take(`${SSH_PASSWORD_RATE.name}:${peerAddress}`, SSH_PASSWORD_RATE).then((decision) => {
          if (!decision.allowed) throw new Error('rate limited');
          return deps.authenticateApiKey(ctx.password, peerAddress);
        }).then((user) => {
          principal = user;
          const secret = ctx.password;
          current = () => deps.authenticateApiKey(secret, peerAddress).then((now) => (now.userId === user.userId ? now : null), () => null);
          connection.loggedIn(user.userId);
          ctx.accept();
        }, refuse);
      } else refuse();
    });
    client.on('ready', () => {
      client.on('session', (acceptSession) => {
        const session = acceptSession();
        session.on('exec', (accept, _reject, info) => {
          const command = info.command.trim();
          const channel = accept();
          const userId = principal?.kind === 'user' ? principal.userId : '';
          const running = sessionsOf.get(userId) ?? 0;
          if (running >= deps.maxSessionsPerUser) {
            channel.stderr.write(`kiln: this user has ${running} SSH sessions running, the most ssh.maxSessionsPerUser allows; wait for one to end\n`);
            channel.exit(1);
            channel.end();
            return;
          }
          sessionsOf.set(userId, running + 1);
          let released = false;
          // Given back once: when the session's runner ends, or its channel or connection closes
          // (ssh2 does not close a channel whose connection died).
          const release = () => {
            if (released) return;
            released = true;
            client.off('close', release);
            const left = (sessionsOf.get(userId) ?? 1) - 1;
            if (left > 0) sessionsOf.set(userId, left);
            else sessionsOf.delete(userId);
          };
          channel.once('close', release);
          client.once('close', release);
          const serve = SERVE_COMMAND.exec(command);
          const daemon = DAEMON_COMMAND.exec(command);
          if (daemon !== null || serve !== null) {
            void stillLoggedIn(channel, current).then((who) => {
              if (who === null) return;
              if (daemon !== null) return runDaemon(channel, who, cacheName, daemon[1] ?? null, () => connection.hold());
              return runServe(channel, who, cacheName, serve![1] !== undefined, () => connection.hold());
            }).finally(release);
          } else {
            release();
            channel.stderr.write(`kiln serves only \`nix-daemon --stdio\` (ssh-ng://CACHE@host) and \`nix-store --serve --write\` (ssh://CACHE@host); not "${info.command.slice(0, 200)}"\n`);
            channel.exit(127);
            channel.end();
          }
        });
        session.on('pty', (_accept, reject) => reject());
        session.on('shell', (_accept, reject) => reject());
        session.on('subsystem', (_accept, reject) => reject());
      });
    });
    client.on('error', (e) => log.debug({ err: e, peerAddress }, 'ssh: connection error'));
  };

  /** The login now, or null after telling the client it no longer holds (the session ends). */
  async function stillLoggedIn(channel: ServerChannel, current: () => Promise<Principal | null>): Promise<Principal | null> {
    const who = await current().catch((e: unknown) => {
      log.error({ err: e }, 'ssh: checking a login again failed');
      return null;
    });
    if (who === null && !channel.destroyed) {
      channel.stderr.write('kiln: this login no longer holds (its SSH key was removed, its account disabled, or its API key revoked or expired); log in again\n');
      channel.exit(1);
      channel.end();
    }
    return who;
  }

  async function runDaemon(channel: ServerChannel, who: Principal | null, name: string, project: string | null, hold: () => () => void): Promise<void> {
    let code = 0;
    try {
      const store = who === null ? null : await sessionStore(deps.sql, who, name, project);
      await serveDaemonSession(deps, store, channel, channelOutput(channel), noCache(name), hold);
    } catch (e) {
      code = 1;
      if (e instanceof WireError) log.debug({ err: e, cache: name }, 'ssh: session ended on a protocol error');
      else log.error({ err: e, cache: name }, 'ssh: session failed');
    }
    if (!channel.destroyed) {
      channel.exit(code);
      channel.end();
    }
  }

  async function runServe(channel: ServerChannel, who: Principal | null, name: string, write: boolean, hold: () => () => void): Promise<void> {
    let code = 0;
    try {
      const store = who === null ? null : await sessionStore(deps.sql, who, name);
      const stderr = (text: string) => {
        if (!channel.destroyed) channel.stderr.write(text);
      };
      await serveLegacySession(deps, store, write, channel, channelOutput(channel), noCache(name), stderr, hold);
    } catch (e) {
      code = 1;
      // No error message on the serve protocol's wire: the client shows the session's stderr.
      if (e instanceof StoreRefusal || e instanceof SessionEnds || e instanceof ApiError || e instanceof WireError) {
        if (!channel.destroyed) channel.stderr.write(`error: ${e.message}\n`);
      } else log.error({ err: e, cache: name }, 'ssh: serve session failed');
    }
    if (!channel.destroyed) {
      channel.exit(code);
      channel.end();
    }
  }

  // kiln accepts the TCP connections itself and hands them to ssh2, so the login grace counts
  // from the accept (ssh2 tells of a connection only once the peer sent its version line).
  const servers: NetServer[] = [];
  let port = deps.port;
  try {
    for (const address of deps.listenAddresses) {
      const accepted = new Map<string, SshConnection>();
      // On a dual-stack listener an IPv4 peer is ::ffff:a.b.c.d; allowed_ips name it as a.b.c.d.
      const ssh = new Server({ hostKeys: [deps.hostKey], ident: 'kiln' }, (client, info) =>
        onConnection(client, mappedIpv4(info.ip) ?? info.ip, accepted.get(`${info.ip}|${info.port}`)));
      const server = createServer((socket) => {
        // A reply is often two small writes (STDERR_LAST, then the answer): with Nagle's algorithm
        // the second waits for the client's delayed ACK, some 40 ms per round trip (OpenSSH's
        // sshd sets TCP_NODELAY for sessions too).
        socket.setNoDelay(true);
        const key = `${socket.remoteAddress}|${socket.remotePort}`;
        ssh.injectSocket(socket);
        accepted.set(key, connections.accept(socket));
        socket.once('close', () => accepted.delete(key));
      });
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, address, () => {
          server.off('error', reject);
          resolve();
        });
      });
      servers.push(server);
      const bound = server.address();
      if (port === 0 && bound !== null && typeof bound === 'object') port = bound.port;
    }
  } catch (e) {
    for (const s of servers) s.close();
    throw e;
  }
  log.info({ port, addresses: deps.listenAddresses }, 'kiln serves SSH');
  return {
    port,
    sweepConnections: () => connections.sweep(),
    close: async () => {
      const closed = Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
      connections.closeAll();
      await closed;
    },
  };
}
