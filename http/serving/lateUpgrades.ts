// Completes a relayed WebSocket's upgrade once the main thread has accepted it (forwardWebSocket.ts),
// without res.cork(). In the uWS build kiln uses, HttpResponse.cork() around an upgrade made after
// the upgrade handler returned can misread the upgraded socket's memory as an HTTP response's and
// close it just after its open event (uWebSockets issue 1928, fixed upstream by PR 1929): that was
// the relay race, a relayed socket ending 1006 before its first frame, a few in a hundred under
// load. Uncorked, the upgrade is safe but uWS.js warns on every one; inside any uWS handler of the
// thread it is neither. So a late upgrade is queued, and a request to a private loopback app of the
// thread runs the queue from its handler (one loopback round trip per batch of upgrades).
import { Agent, get } from 'node:http';
import uWS from 'uWebSockets.js';
import type { us_listen_socket } from 'uWebSockets.js';

export interface LateUpgrades {
  /** Runs `upgrade` soon, inside a uWS handler; `upgrade` checks itself whether its client is still there. */
  run(upgrade: () => void): void;
  /** Closes the private listener (a thread must not end holding it). */
  close(): void;
}

export function lateUpgrades(): Promise<LateUpgrades> {
  const queue: (() => void)[] = [];
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const app = uWS.App();
  let listenSocket: us_listen_socket | null = null;
  let poking = false;
  app.get('/*', (res) => {
    for (const upgrade of queue.splice(0)) upgrade();
    res.end();
  });
  return new Promise((resolve, reject) => {
    app.listen('127.0.0.1', 0, (socket) => {
      if (socket === false) return reject(new Error('a serving thread cannot listen on a loopback port for its WebSocket upgrades'));
      listenSocket = socket;
      const port = uWS.us_socket_local_port(socket as unknown as uWS.us_socket);
      const poke = (): void => {
        if (poking || listenSocket === null) return;
        poking = true;
        const done = (): void => {
          poking = false;
          if (queue.length > 0) poke();
        };
        // A failed round trip (a loaded machine resetting loopback connections) is tried again shortly.
        const failed = (): void => void setTimeout(done, 20);
        get({ host: '127.0.0.1', port, path: '/', agent }, (answer) => {
          answer.resume();
          answer.on('end', done);
          answer.on('error', failed);
        }).on('error', failed);
      };
      resolve({
        run(upgrade) {
          queue.push(upgrade);
          poke();
        },
        close() {
          if (listenSocket !== null) uWS.us_listen_socket_close(listenSocket);
          listenSocket = null;
          queue.length = 0;
          agent.destroy();
          app.close();
        },
      });
    });
  });
}
