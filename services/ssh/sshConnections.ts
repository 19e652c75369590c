// The SSH server's open connections, from the TCP accept on: a connection that has not logged in
// within ssh.loginGraceSecs is dropped (an unauthenticated socket costs a key exchange and memory,
// and a hostile peer could pile them up, as OpenSSH's LoginGraceTime guards against). A logged-in
// connection is dropped after ssh.idleTimeoutSecs with no byte from the client and no operation
// in progress (a build waited for sends nothing for a long time): each holds a slot of the
// user's sessions and a store connection. Time is read from the injected clock by a sweep, so
// tests step it; the socket is destroyed, not ended, since a peer that never reads would keep a
// half-closed socket alive.
import type { Socket } from 'node:net';
import type { Clock } from '../../supervisors/index.js';

export interface SshConnectionsDeps {
  clock: Clock;
  /** ssh.loginGraceSecs */
  loginGraceSecs: number;
  /** ssh.idleTimeoutSecs; 0: logged-in connections are never dropped for idleness */
  idleTimeoutSecs: number;
}

/** One accepted connection, as the server tells this ledger about it. */
export interface SshConnection {
  /** The login succeeded (a verified key signature or an accepted password) as `userId`. */
  loggedIn(userId: string): void;
  /** An operation runs that may keep the client silent (a build): the connection is not idle until the returned release is called. */
  hold(): () => void;
}

interface Tracked extends SshConnection {
  socket: Socket;
  connectedAt: number;
  userId: string | null;
  /** clock milliseconds of the client's last byte (or of the login) */
  lastHeard: number;
  /** operations in progress (hold) */
  held: number;
}

export class SshConnections {
  private readonly open = new Set<Tracked>();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly deps: SshConnectionsDeps) {}

  /** Starts the connection's clock; it leaves the ledger when its socket closes. */
  accept(socket: Socket): SshConnection {
    const tracked: Tracked = {
      socket, connectedAt: this.now(), userId: null, lastHeard: this.now(), held: 0,
      loggedIn: (userId) => {
        tracked.userId = userId;
        tracked.lastHeard = this.now();
      },
      hold: () => {
        tracked.held++;
        let released = false;
        return () => {
          if (released) return;
          released = true;
          tracked.held--;
          tracked.lastHeard = this.now();
        };
      },
    };
    this.open.add(tracked);
    // Added after ssh2's own listener (the caller injects the socket first), so no byte is missed.
    socket.on('data', () => {
      tracked.lastHeard = this.now();
    });
    socket.once('close', () => this.open.delete(tracked));
    this.arm();
    return tracked;
  }

  /** Drops every connection past its login grace or idle past ssh.idleTimeoutSecs; how many were dropped. */
  sweep(): number {
    const graceCutoff = this.now() - this.deps.loginGraceSecs * 1000;
    const idleCutoff = this.deps.idleTimeoutSecs === 0 ? -Infinity : this.now() - this.deps.idleTimeoutSecs * 1000;
    let dropped = 0;
    for (const c of this.open) {
      const late = c.userId === null && c.connectedAt < graceCutoff;
      const idle = c.userId !== null && c.held === 0 && c.lastHeard < idleCutoff;
      if (late || idle) {
        this.open.delete(c);
        c.socket.destroy();
        dropped++;
      }
    }
    return dropped;
  }

  /** Destroys every connection (the server stops). */
  closeAll(): void {
    for (const c of this.open) c.socket.destroy();
    this.open.clear();
  }

  private arm(): void {
    if (this.timer !== null) return;
    this.timer = setInterval(() => {
      this.sweep();
      if (this.open.size === 0 && this.timer !== null) {
        clearInterval(this.timer);
        this.timer = null;
      }
    }, Math.min(5_000, this.deps.loginGraceSecs * 500, this.deps.idleTimeoutSecs === 0 ? Infinity : this.deps.idleTimeoutSecs * 500));
    this.timer.unref();
  }

  private now(): number {
    return this.deps.clock.now().getTime();
  }
}
