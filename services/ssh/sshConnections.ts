// The SSH server's open connections, from the TCP accept on: a connection that has not logged in
// within ssh.loginGraceSecs is dropped (an unauthenticated socket costs a key exchange and memory,
// and a hostile peer could pile them up, as OpenSSH's LoginGraceTime guards against). Time is
// read from the injected clock by a sweep, so tests step it; the socket is destroyed, not ended,
// since a peer that never reads would keep a half-closed socket alive.
import type { Socket } from 'node:net';
import type { Clock } from '../../supervisors/index.js';

export interface SshConnectionsDeps {
  clock: Clock;
  /** ssh.loginGraceSecs */
  loginGraceSecs: number;
}

/** One accepted connection, as the server tells this ledger about it. */
export interface SshConnection {
  /** The login succeeded (a verified key signature or an accepted password) as `userId`. */
  loggedIn(userId: string): void;
}

interface Tracked extends SshConnection {
  socket: Socket;
  connectedAt: number;
  userId: string | null;
}

export class SshConnections {
  private readonly open = new Set<Tracked>();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly deps: SshConnectionsDeps) {}

  /** Starts the connection's clock; it leaves the ledger when its socket closes. */
  accept(socket: Socket): SshConnection {
    const tracked: Tracked = {
      socket, connectedAt: this.now(), userId: null,
      loggedIn: (userId) => {
        tracked.userId = userId;
      },
    };
    this.open.add(tracked);
    socket.once('close', () => this.open.delete(tracked));
    this.arm();
    return tracked;
  }

  /** Drops every connection past its login grace; how many were dropped. */
  sweep(): number {
    const graceCutoff = this.now() - this.deps.loginGraceSecs * 1000;
    let dropped = 0;
    for (const c of this.open) {
      if (c.userId === null && c.connectedAt < graceCutoff) {
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
    }, Math.min(5_000, this.deps.loginGraceSecs * 500));
    this.timer.unref();
  }

  private now(): number {
    return this.deps.clock.now().getTime();
  }
}
