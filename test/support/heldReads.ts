// Reads a test holds open: a GET whose body this side does not read, so the server's stream stays
// open under backpressure (and keeps its place among nar.maxConcurrentDownloads) until readAll.
// A held read that must outlast uWS's 10 s idle timeout (a client taking no bytes for 10 s is cut,
// and its place comes free) crawls instead: it takes a chunk now and then.
import { get, type IncomingMessage } from 'node:http';

/** A GET on a connection of its own, its body left unread. */
export function holdOpen(url: string, headers: Record<string, string> = {}): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    get(url, { agent: false, headers }, (res) => {
      res.pause();
      resolve(res);
    }).on('error', reject);
  });
}

/** Reads the rest of a held answer: its byte count. */
export async function readAll(res: IncomingMessage): Promise<number> {
  let bytes = 0;
  res.resume();
  for await (const chunk of res) bytes += (chunk as Buffer).byteLength;
  return bytes;
}

/**
 * A crawling reader takes one socket chunk (≤ 64 KiB) every CRAWL_MS, about 300 KiB/s. uWS re-arms
 * its timeout when it writes, which needs the kernel to call the server's socket writable again,
 * so a slower crawl is cut too. Measured on a 24 MiB NAR (h42; the server's side of the connection
 * watched with ss): a reader that took nothing was cut 9 to 10 s after its last byte, one crawling
 * every 500 ms (128 KiB/s) by 21 s, one every 200 or 100 ms was open after 30 s. At this pace the
 * file lasts about a minute before its body ends and its place comes free (24 MiB minus the ~8 MB
 * the sockets of a relayed read hold).
 */
const CRAWL_MS = 200;
export interface Crawl {
  res: IncomingMessage;
  /** reads the rest at once: the byte count of the whole answer */
  finish(): Promise<number>;
  /** the byte count when the answer ended, failed or was cut */
  closed: Promise<number>;
}

/** Starts a held answer (holdOpen's) crawling. */
export function crawl(res: IncomingMessage): Crawl {
  let bytes = 0;
  let fast = false;
  res.on('data', (c: Buffer) => {
    bytes += c.length;
    if (fast) return;
    res.pause();
    setTimeout(() => res.resume(), CRAWL_MS);
  });
  const closed = new Promise<number>((resolve) => {
    res.on('end', () => resolve(bytes));
    res.on('error', () => resolve(bytes));
    res.on('aborted', () => resolve(bytes));
  });
  res.resume(); // holdOpen paused it: a 'data' listener alone does not start the flow again
  return {
    res,
    closed,
    finish() {
      fast = true;
      res.resume();
      return closed;
    },
  };
}
