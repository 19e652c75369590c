// Build logs as they stream in over /proto, stored in chunks of about log.chunkBytes
// (spec: configuration, log.chunkBytes). A chunk is cut at the last line end past the target, so
// a long line may make one bigger. Each attempt of a derivation_build has its own log.
import type { Sql } from 'postgres';

interface OpenLog {
  buffered: Buffer[];
  bytes: number;
  seq: number;
  /** bytes of this attempt already in build_log_chunks */
  storedBytes: number;
  /** chunks cut from the buffer whose insert has not finished, oldest first */
  inflight: Buffer[];
  writing: Promise<void>;
  failure?: unknown;
}

export class BuildLogs {
  private readonly open = new Map<string, OpenLog>();

  /** `onChange` hears of every append and every stored chunk (live log readers, services/builds/buildLogFeed.ts). */
  constructor(private readonly sql: Sql, private readonly chunkBytes: number, private readonly onChange: (derivationBuildId: string) => void = () => {}) {}

  /**
   * What this process holds of an attempt's log that is not stored yet, from the piece that holds
   * byte `from` on (a reader's position), and the byte offset it starts at; null when this process
   * is not receiving that attempt. Pieces wholly before `from` are not copied: a follower asks on
   * every append, and copying all that waits for the database each time cost time quadratic in
   * the backlog (a log arriving faster than it is stored stalled its followers).
   */
  tail(derivationBuildId: string, attempt: number, from = 0): { offset: number; data: Buffer } | null {
    const log = this.open.get(`${derivationBuildId}/${attempt}`);
    if (!log) return null;
    let offset = log.storedBytes;
    const pieces: Buffer[] = [];
    for (const piece of [log.inflight, log.buffered]) {
      for (const part of piece) {
        if (pieces.length === 0 && offset + part.length <= from) offset += part.length;
        else pieces.push(part);
      }
    }
    return { offset, data: pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces) };
  }

  append(derivationBuildId: string, attempt: number, data: Uint8Array): void {
    const key = `${derivationBuildId}/${attempt}`;
    let log = this.open.get(key);
    if (!log) {
      log = { buffered: [], bytes: 0, seq: 0, storedBytes: 0, inflight: [], writing: Promise.resolve() };
      this.open.set(key, log);
    }
    log.buffered.push(Buffer.from(data));
    log.bytes += data.length;
    this.onChange(derivationBuildId);
    if (log.bytes < this.chunkBytes) return;
    let all = Buffer.concat(log.buffered);
    for (;;) {
      // The first line end at or past the target closes a chunk; a line longer than four targets is cut anyway.
      const lineEnd = all.indexOf(0x0a, this.chunkBytes - 1);
      const end = lineEnd !== -1 ? lineEnd + 1 : all.length >= this.chunkBytes * 4 ? all.length : 0;
      if (end === 0) break;
      this.write(derivationBuildId, attempt, log, all.subarray(0, end));
      all = all.subarray(end);
      if (all.length < this.chunkBytes) break;
    }
    log.buffered = all.length > 0 ? [all] : [];
    log.bytes = all.length;
  }

  /** Writes what is buffered; resolves when every chunk of this attempt is stored. */
  async finish(derivationBuildId: string, attempt: number): Promise<void> {
    const key = `${derivationBuildId}/${attempt}`;
    const log = this.open.get(key);
    if (!log) return;
    this.open.delete(key);
    if (log.bytes > 0) this.write(derivationBuildId, attempt, log, Buffer.concat(log.buffered));
    await log.writing;
    if (log.failure) throw new Error(`storing the log of ${derivationBuildId} failed`, { cause: log.failure });
  }

  private write(derivationBuildId: string, attempt: number, log: OpenLog, data: Buffer): void {
    const seq = log.seq++;
    log.inflight.push(data);
    log.writing = log.writing.then(async () => {
      try {
        await this.sql`insert into build_log_chunks (derivation_build_id, attempt, seq, data) values (${derivationBuildId}, ${attempt}, ${seq}, ${data})`;
        log.storedBytes += data.length;
      } finally {
        log.inflight.shift();
      }
      this.onChange(derivationBuildId);
    }).catch((error: unknown) => {
      // A lost log chunk must not fail the build; the error is kept for finish() to report.
      log.failure ??= error;
    });
  }
}

/** The stored log of a derivation build's latest attempt. */
export async function readBuildLog(sql: Sql, derivationBuildId: string): Promise<Buffer> {
  const rows = await sql<{ data: Buffer }[]>`
    select data from build_log_chunks where derivation_build_id = ${derivationBuildId}
      and attempt = (select max(attempt) from build_log_chunks where derivation_build_id = ${derivationBuildId})
    order by seq`;
  return Buffer.concat(rows.map((r) => r.data));
}
