// Slow readers of large NARs (docs/http.md, "Serving threads", NAR files): a client that reads a
// 16 MiB NAR at a crawl holds the serving thread to what the socket takes (uWS backpressure), so
// the process's memory stays bounded by a few pieces per client, not the file. The bound is on
// memory (peak RSS while many such clients crawl), never on time: the crawl only has to be slower
// than the thread could read the file.
import { createHash, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import t from 'tap';
import { startTestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { nixStoreAdd, tempDir } from '../../support/nixStore.js';
import { localNar, uploadChunked } from '../../support/narUploads.js';
import { threadSum } from '../../support/servingThreads.js';

const CLIENTS = 12;
const NAR_BYTES = 16 << 20;
const MiB = 1 << 20;
/** Pieces of the crawl: a read of at most this much, then a pause. */
const CRAWL_PAUSE_MS = 15;

interface CrawlResult { status: string; bodyBytes: number; sha256: string }

/**
 * GET `path` on a connection of its own, reading one socket chunk (≤ 64 KiB) per pause. Calls
 * `sample` after every chunk, so the peak of the process's RSS is seen while the bodies are in flight.
 */
function crawl(port: number, path: string, sample: () => void): Promise<CrawlResult> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    const hash = createHash('sha256');
    let head = Buffer.alloc(0);
    let status = '';
    let bodyBytes = 0;
    socket.on('data', (chunk: Buffer) => {
      sample();
      if (status === '') {
        head = Buffer.concat([head, chunk]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        status = head.subarray(0, head.indexOf('\r\n')).toString();
        chunk = head.subarray(end + 4);
      }
      hash.update(chunk);
      bodyBytes += chunk.length;
      socket.pause();
      setTimeout(() => socket.resume(), CRAWL_PAUSE_MS);
    });
    socket.on('end', () => resolve({ status, bodyBytes, sha256: hash.digest('hex') }));
    socket.on('error', reject);
    socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
  });
}

t.test('slow readers of a 16 MiB NAR through the serving threads: memory stays bounded', async (t) => {
  const noise = tempDir('kiln-slow-reader-');
  const content = randomBytes(NAR_BYTES); // zstd cannot shrink it: the stored file is ~16 MiB
  writeFileSync(join(noise, 'noise'), content);
  const big = localNar(nixStoreAdd(noise));
  // Fewer read places than clients: the rest wait in the line of the thread they reached.
  const kiln = await startTestKiln(t, { 'http.threads': 2, 'nar.maxConcurrentDownloads': 4 });
  const admin = await signUp(kiln, 'ada');
  await createTestCache(kiln.sql, 'pub', { public: true, ownerId: admin.id });
  t.equal((await uploadChunked(kiln, admin.token, 'pub', big)).status, 200);
  const narinfo = await (await fetch(`${kiln.url}/cache/pub/${big.hash}.narinfo`)).text();
  const url = /^URL: (.*)$/m.exec(narinfo)?.[1];
  const fileSize = Number(/^FileSize: (\d+)$/m.exec(narinfo)?.[1]);
  t.ok(fileSize > NAR_BYTES, `the stored file is the whole NAR (${fileSize} bytes)`);
  const reference = Buffer.from(await (await fetch(`${kiln.url}/cache/pub/${url}`)).arrayBuffer());
  const referenceHash = createHash('sha256').update(reference).digest('hex');
  /** The threads' summaries summed: requests they took, relayed to the main thread, and NAR files they sent. */
  // Read in this process (what GET /api/v1/admin/actors shows): an API request would land on a thread and be counted.
  const threadSums = () => {
    const root = kiln.root.inspect();
    return { requests: threadSum(root, 'requests'), forwarded: threadSum(root, 'forwarded'), nars: threadSum(root, 'nars') };
  };
  const before = threadSums();

  const port = Number(new URL(kiln.url).port);
  const baseline = process.memoryUsage.rss();
  let peak = baseline;
  const sample = () => {
    peak = Math.max(peak, process.memoryUsage.rss());
  };
  const results = await Promise.all(Array.from({ length: CLIENTS }, () => crawl(port, `/cache/pub/${url}`, sample)));

  t.same(new Set(results.map((r) => r.status)), new Set(['HTTP/1.1 200 OK']));
  t.ok(results.every((r) => r.bodyBytes === fileSize && r.sha256 === referenceHash), 'every crawler got the whole file, byte for byte');
  // The main thread listens on the port too, so the kernel gives it some of the clients: the claim
  // is about the clients the threads took. Each got its file from that thread (a thread with no free
  // read place waits for one in its own line; it relayed such readers to the main thread before).
  const after = threadSums();
  const taken = after.requests - before.requests;
  t.ok(taken > 0, `the threads took ${taken} of the ${CLIENTS} clients`);
  t.equal(after.forwarded - before.forwarded, 0, 'no thread relayed a client to the main thread');
  t.equal(after.nars - before.nars, taken, 'every client a thread took was sent its file by that thread');
  // Unbounded, the threads would hold each file whole in uWS's buffers: CLIENTS × 16 MiB = 192 MiB.
  // Bounded, each client costs the pieces in flight (1 MiB each, two taking turns) and uWS's share.
  const grown = (peak - baseline) / MiB;
  t.ok(grown < (CLIENTS * fileSize) / MiB / 2, `peak RSS grew ${grown.toFixed(0)} MiB while ${CLIENTS} clients crawled through ${(fileSize / MiB).toFixed(0)} MiB each (unbounded: about ${(CLIENTS * fileSize / MiB).toFixed(0)} MiB)`);
});
