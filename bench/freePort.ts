// A free TCP port for a benchmark's servers, asked of the kernel.
import { createServer } from 'node:net';

/** A port nothing listens on right now. */
export function freePortForBench(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}
