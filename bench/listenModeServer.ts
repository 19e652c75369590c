// The server of the listen-modes bench, in a process of its own: N worker threads, each a bare uWS
// app answering GET /* with a narinfo-sized body, reached one of two ways (issue 22 item 1):
//   reuseport: every thread listens on the port itself (SO_REUSEPORT; the kernel spreads connections);
//   acceptor:  only the main thread listens and hands each accepted socket to a thread's app
//              (uWS's getDescriptor / addChildAppDescriptor: round-robin over the children).
// Reports the port to the parent; 'stop' ends it.
//   argv: <reuseport|acceptor> <threads> <port>
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import uWS from 'uWebSockets.js';

type Mode = 'reuseport' | 'acceptor';
interface ThreadData { mode: Mode; port: number }

/** uWS.js 6 has the descriptor hand-off without typings. */
interface DescriptorApps {
  getDescriptor(): unknown;
  addChildAppDescriptor(descriptor: unknown): void;
}

const BODY = Buffer.alloc(1200, 'n');

if (!isMainThread) {
  const { mode, port } = workerData as ThreadData;
  const app = uWS.App().get('/*', (res) => {
    res.cork(() => res.writeHeader('Content-Type', 'text/x-nix-narinfo').end(BODY));
  });
  let listenSocket: uWS.us_listen_socket | false = false;
  if (mode === 'reuseport') {
    app.listen('127.0.0.1', port, (socket) => {
      listenSocket = socket;
      parentPort!.postMessage({ listening: socket !== false });
    });
  } else {
    parentPort!.postMessage({ descriptor: (app as unknown as DescriptorApps).getDescriptor() });
  }
  // A thread that ends holding uWS sockets aborts the process: close them first.
  parentPort!.on('message', () => {
    if (listenSocket !== false) uWS.us_listen_socket_close(listenSocket);
    app.close();
    parentPort!.close();
  });
} else {
  const mode = process.argv[2] as Mode;
  const threads = Number(process.argv[3]);
  const port = Number(process.argv[4]);
  const acceptor = uWS.App();
  const workers = await Promise.all(Array.from({ length: threads }, () => new Promise<Worker>((resolve, reject) => {
    const worker = new Worker(new URL(import.meta.url), { workerData: { mode, port } satisfies ThreadData, execArgv: process.execArgv });
    worker.once('message', (message: { listening?: boolean; descriptor?: unknown }) => {
      if (message.listening === false) reject(new Error(`a thread cannot listen on ${port}`));
      if (message.descriptor !== undefined) (acceptor as unknown as DescriptorApps).addChildAppDescriptor(message.descriptor);
      resolve(worker);
    });
  })));
  const ready = () => process.send!({ port });
  if (mode === 'acceptor') {
    acceptor.listen('127.0.0.1', port, (socket) => {
      if (!socket) throw new Error(`the acceptor cannot listen on ${port}`);
      ready();
    });
  } else ready();
  process.once('disconnect', () => process.exit(1));
  process.on('message', (message) => {
    if (message !== 'stop') return;
    acceptor.close();
    void Promise.all(workers.map((worker) => new Promise((resolve) => {
      worker.once('exit', resolve);
      worker.postMessage('stop');
    }))).then(() => process.exit(0));
  });
}
