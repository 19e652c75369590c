// uWS sets SO_REUSEPORT only on a socket bound to a named port (uSockets skips it for port 0), so
// serving threads could not share an ephemeral port: with `http.threads` > 1 and `port` 0 (tests,
// benches), a free port is chosen first and every listener binds that one.
import { createServer } from 'node:net';

export function freePort(listenAddr: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, listenAddr, () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}
