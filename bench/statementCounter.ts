// A loopback proxy in front of PostgreSQL that counts the statements a server sends, by text: the
// bench's way to see what a pass costs in round trips (pg_stat_statements is not loaded on the
// shared PostgreSQL, and kiln's pools are not to be instrumented for a bench). It reads the client
// side of the wire protocol only: Parse names a statement's text, Bind ties the portal to it,
// Execute (extended protocol) or Query (simple protocol) runs it; Sync ends a round trip.
// Bytes are forwarded untouched in both directions.
import { createConnection, createServer, type Server, type Socket } from 'node:net';

export interface StatementCounts {
  /** statements run, by their text (whitespace collapsed, cut at 140 characters) */
  byText: Map<string, number>;
  statements: number;
  /** Sync and simple Query messages: round trips the client waited for */
  roundTrips: number;
}

export interface StatementCounter {
  port: number;
  counts(): StatementCounts;
  reset(): void;
  close(): Promise<void>;
}

const short = (text: string) => text.replace(/\s+/g, ' ').trim().slice(0, 140);
const cstring = (buf: Buffer, at: number): [string, number] => {
  const end = buf.indexOf(0, at);
  return [buf.toString('utf8', at, end), end + 1];
};

/** Starts the proxy on a free loopback port, forwarding to `target`. */
export async function startStatementCounter(target: { host: string; port: number }): Promise<StatementCounter> {
  let byText = new Map<string, number>();
  let statements = 0;
  let roundTrips = 0;
  const count = (text: string) => {
    statements++;
    byText.set(text, (byText.get(text) ?? 0) + 1);
  };
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = createConnection(target);
    sockets.add(client).add(upstream);
    const named = new Map<string, string>();
    let portal = '';
    let started = false;
    let pending: Buffer = Buffer.alloc(0);
    client.on('data', (chunk: Buffer) => {
      upstream.write(chunk);
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      for (;;) {
        if (!started) {
          // untyped messages: SSLRequest / GSSENCRequest (8 bytes) then the startup message
          if (pending.length < 8) return;
          const length = pending.readInt32BE(0);
          if (pending.length < length) return;
          if (pending.readInt32BE(4) === 196608) started = true;
          pending = pending.subarray(length);
          continue;
        }
        if (pending.length < 5) return;
        const length = pending.readInt32BE(1);
        if (pending.length < length + 1) return;
        const type = String.fromCharCode(pending[0]!);
        const body = pending.subarray(5, length + 1);
        pending = pending.subarray(length + 1);
        if (type === 'P') {
          const [name, next] = cstring(body, 0);
          named.set(name, short(cstring(body, next)[0]));
        } else if (type === 'B') {
          const [, next] = cstring(body, 0);
          portal = named.get(cstring(body, next)[0]) ?? '?';
        } else if (type === 'E') {
          count(portal);
        } else if (type === 'Q') {
          count(short(cstring(body, 0)[0]));
          roundTrips++;
        } else if (type === 'S') {
          roundTrips++;
        }
      }
    });
    upstream.on('data', (chunk: Buffer) => client.write(chunk));
    const end = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the statement counter has no port');
  return {
    port: address.port,
    counts: () => ({ byText: new Map(byText), statements, roundTrips }),
    reset() {
      byText = new Map();
      statements = 0;
      roundTrips = 0;
    },
    close: () => new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    }),
  };
}

/** The counts as lines for the bench's output: totals, per build when given, then the most run statements. */
export function formatCounts(counts: StatementCounts, builds: number, top = 25): string[] {
  const per = (n: number) => (builds > 0 ? ` (${(n / builds).toFixed(2)} per build)` : '');
  const lines = [`statements: ${counts.statements}${per(counts.statements)}, round trips: ${counts.roundTrips}${per(counts.roundTrips)}`];
  const sorted = [...counts.byText].sort((a, b) => b[1] - a[1]).slice(0, top);
  for (const [text, n] of sorted) lines.push(`  ${String(n).padStart(7)}  ${text}`);
  return lines;
}
