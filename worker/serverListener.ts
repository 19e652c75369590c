// worker.discoverable: the worker listens on worker.listenAddr:worker.port and a server connects
// to /proto (docs/worker.md, "Discoverable workers"). The server proves itself with a token from
// worker.acceptedServerTokensFile before the upgrade; then the usual handshake runs, the worker
// speaking first. One server at a time: a second connection is refused while one is open.
import type { IncomingMessage } from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';
import type { Logger } from '../config/index.js';
import { serverTokenAccepted, type AcceptedServerToken } from './serverTokens.js';

export interface ServerListenerOptions {
  listenAddr: string;
  port: number;
  /** null accepts every server (a warning is logged at start) */
  accepted: readonly AcceptedServerToken[] | null;
  log: Logger;
  /** a server connected and proved itself */
  onServer(socket: WebSocket, address: string): void;
  busy(): boolean;
}

export interface ServerListener {
  readonly port: number;
  close(): Promise<void>;
}

const SOCKET_MAX_PAYLOAD = 64 * 1024 * 1024;

export function listenForServers(options: ServerListenerOptions): Promise<ServerListener> {
  const { log } = options;
  const verify = async (req: IncomingMessage): Promise<{ ok: true } | { ok: false; status: number; message: string }> => {
    if (new URL(req.url ?? '/', 'http://worker').pathname !== '/proto') return { ok: false, status: 404, message: 'only /proto is served here' };
    if (options.busy()) return { ok: false, status: 409, message: 'this worker is already connected to a server' };
    if (options.accepted === null) return { ok: true };
    const bearer = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    const peer = String(req.headers['x-kiln-peer'] ?? '*');
    if (!bearer) return { ok: false, status: 401, message: 'a server connects with Authorization: Bearer <token>' };
    if (!(await serverTokenAccepted(options.accepted, peer, bearer[1]!))) return { ok: false, status: 403, message: 'the token is not in worker.acceptedServerTokensFile' };
    return { ok: true };
  };
  return new Promise((resolve, reject) => {
    const wss = new WebSocketServer({
      host: options.listenAddr, port: options.port, maxPayload: SOCKET_MAX_PAYLOAD, perMessageDeflate: false,
      verifyClient: (info, done) => {
        void verify(info.req).then((v) => {
          if (!v.ok) log.warn({ address: info.req.socket.remoteAddress, status: v.status, reason: v.message }, 'refused a server connection');
          return v.ok ? done(true) : done(false, v.status, v.message);
        });
      },
    });
    wss.on('connection', (socket, req) => options.onServer(socket, req.socket.remoteAddress ?? ''));
    wss.once('error', reject);
    wss.once('listening', () => {
      const address = wss.address();
      resolve({
        port: typeof address === 'object' && address !== null ? address.port : options.port,
        close: () => new Promise<void>((done) => {
          for (const client of wss.clients) client.terminate();
          wss.close(() => done());
        }),
      });
    });
  });
}
