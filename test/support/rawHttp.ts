// HTTP/1.1 over a bare socket, for what fetch hides: pipelining, odd framing, what happens to a
// connection. The caller writes bytes and waits for a condition on what came back, never for a time.
import { connect, type Socket } from 'node:net';
import { once } from 'node:events';

export interface RawResponse {
  status: number;
  /** lower-case names; repeats joined with ", " */
  headers: Record<string, string>;
  body: string;
}

export class RawConnection {
  received = Buffer.alloc(0);
  closed = false;
  /** the first socket error (a reset, EPIPE), if any */
  error: string | null = null;
  private readonly waiters = new Set<() => void>();

  private constructor(readonly socket: Socket) {
    socket.on('data', (d: Buffer) => {
      this.received = Buffer.concat([this.received, d]);
      this.wake();
    });
    socket.on('error', (e: NodeJS.ErrnoException) => {
      this.error ??= e.code ?? e.message;
      this.wake();
    });
    socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
  }

  static async open(port: number): Promise<RawConnection> {
    const socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    return new RawConnection(socket);
  }

  private wake(): void {
    for (const w of [...this.waiters]) w();
  }

  /** Writes and resolves once the kernel took the bytes, or with the write's error. */
  write(bytes: string | Buffer): Promise<string | null> {
    return new Promise((resolve) => {
      if (this.socket.destroyed) return resolve('destroyed');
      this.socket.write(bytes, (e) => resolve(e ? ((e as NodeJS.ErrnoException).code ?? e.message) : null));
    });
  }

  /** Resolves once `done()` holds or the connection is closed; says whether `done()` held. */
  async until(done: () => boolean): Promise<boolean> {
    while (!done() && !this.closed) {
      await new Promise<void>((resolve) => {
        const w = (): void => {
          this.waiters.delete(w);
          resolve();
        };
        this.waiters.add(w);
      });
    }
    return done();
  }

  /** Waits for `count` complete responses (fewer if the connection closes first). */
  async responses(count: number): Promise<RawResponse[]> {
    await this.until(() => parseResponses(this.received).responses.length >= count);
    return parseResponses(this.received).responses;
  }

  destroy(): void {
    this.socket.destroy();
  }
}

/** The complete responses at the start of `bytes` (Content-Length or chunked bodies), and the bytes after them. */
export function parseResponses(bytes: Buffer): { responses: RawResponse[]; rest: Buffer } {
  const responses: RawResponse[] = [];
  let at = 0;
  for (;;) {
    const headEnd = bytes.indexOf('\r\n\r\n', at);
    if (headEnd < 0) break;
    const [statusLine = '', ...lines] = bytes.subarray(at, headEnd).toString('latin1').split('\r\n');
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
    }
    let bodyStart = headEnd + 4;
    let body: Buffer;
    if (headers['transfer-encoding']?.toLowerCase() === 'chunked') {
      const chunks: Buffer[] = [];
      let ended = false;
      for (;;) {
        const lineEnd = bytes.indexOf('\r\n', bodyStart);
        if (lineEnd < 0) break;
        const size = parseInt(bytes.subarray(bodyStart, lineEnd).toString('latin1'), 16);
        if (!Number.isFinite(size) || lineEnd + 2 + size + 2 > bytes.length) break;
        chunks.push(bytes.subarray(lineEnd + 2, lineEnd + 2 + size));
        bodyStart = lineEnd + 2 + size + 2;
        if (size === 0) {
          ended = true;
          break;
        }
      }
      if (!ended) break;
      body = Buffer.concat(chunks);
    } else {
      const length = Number(headers['content-length'] ?? 0);
      if (bodyStart + length > bytes.length) break;
      body = bytes.subarray(bodyStart, bodyStart + length);
      bodyStart += length;
    }
    responses.push({ status: Number(statusLine.split(' ')[1]), headers, body: body.toString('utf8') });
    at = bodyStart;
  }
  return { responses, rest: bytes.subarray(at) };
}
