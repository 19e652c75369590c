// Reads a test holds open: a GET whose body this side does not read, so the server's stream stays
// open under backpressure (and keeps its place among nar.maxConcurrentDownloads) until readAll.
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
