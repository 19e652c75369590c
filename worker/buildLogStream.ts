// A build's log on its way to the server: lines pass the LogLimiter, gather into chunks of up to
// 64 KiB (sent at least every 250 ms), and each chunk says how many bytes were withheld before
// it. Logs never wait for the socket: when the connection is congested they are dropped and
// counted like lines over the caps, so a chatty build cannot delay NAR pushes or heartbeats.
import type { Outgoing } from '../protocol/index.js';
import type { LogLimiter } from './logLimiter.js';

const CHUNK_BYTES = 64 * 1024;
const FLUSH_MS = 250;
/** Above this many queued socket bytes, log chunks are dropped rather than queued. */
const CONGESTED_BYTES = 16 * 1024 * 1024;

export interface LogSink {
  send(message: Outgoing): boolean;
  readonly bufferedAmount: number;
}

export class BuildLogStream {
  private parts: Buffer[] = [];
  private bytes = 0;
  private seq = 0;
  private droppedSinceLast = 0;
  private noticeGiven = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly jobId: string,
    private readonly sink: LogSink,
    private readonly limiter: LogLimiter,
  ) {}

  line(text: string): void {
    const bytes = Buffer.from(`${text}\n`, 'utf8');
    if (!this.limiter.admit(bytes.length)) {
      this.droppedSinceLast += bytes.length;
      if (!this.noticeGiven) {
        this.noticeGiven = true;
        this.append(Buffer.from('[kiln] the log is over its forwarding cap (worker.log.*); further lines are dropped, the build goes on\n'));
      }
      return;
    }
    this.append(bytes);
  }

  private append(bytes: Buffer): void {
    this.parts.push(bytes);
    this.bytes += bytes.length;
    if (this.bytes >= CHUNK_BYTES) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), FLUSH_MS);
  }

  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.bytes === 0 && this.droppedSinceLast === 0) return;
    const data = Buffer.concat(this.parts, this.bytes);
    this.parts = [];
    this.bytes = 0;
    for (let offset = 0; offset < Math.max(data.length, 1); offset += CHUNK_BYTES) {
      const piece = data.subarray(offset, offset + CHUNK_BYTES);
      if (this.sink.bufferedAmount > CONGESTED_BYTES) {
        this.limiter.droppedBytes += piece.length;
        this.droppedSinceLast += piece.length;
        continue;
      }
      this.sink.send({ t: 'buildLog', jobId: this.jobId, seq: this.seq++, data: piece, droppedBytes: this.droppedSinceLast });
      this.droppedSinceLast = 0;
    }
  }

  close(): { logBytes: number; logDroppedBytes: number } {
    this.flush();
    return { logBytes: this.limiter.forwardedBytes, logDroppedBytes: this.limiter.droppedBytes };
  }
}
