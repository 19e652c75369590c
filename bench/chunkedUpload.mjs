// The client side of the ingest bench, run as its own process (the server's process must keep its
// event loop): PUTs a NAR file in 32 MiB chunks, then finalizes it, and prints the elapsed time.
//   node bench/chunkedUpload.mjs <url of …/nars/{hash}> <token> <nar file> <narinfo JSON>
import { open } from 'node:fs/promises';

const [base, token, file, narinfo] = process.argv.slice(2);
const CHUNK = 32 << 20;
const started = performance.now();
const handle = await open(file, 'r');
const size = (await handle.stat()).size;
const buffer = Buffer.allocUnsafe(CHUNK);
for (let offset = 0; offset < size; offset += CHUNK) {
  const { bytesRead } = await handle.read(buffer, 0, Math.min(CHUNK, size - offset), offset);
  const res = await fetch(`${base}/chunk?offset=${offset}`, {
    method: 'PUT', headers: { authorization: `Bearer ${token}` }, body: buffer.subarray(0, bytesRead),
  });
  if (res.status !== 200) throw new Error(`chunk at ${offset}: ${res.status} ${await res.text()}`);
}
await handle.close();
const uploaded = performance.now();
const done = await fetch(`${base}/finalize`, {
  method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: narinfo,
});
if (done.status !== 200) throw new Error(`finalize: ${done.status} ${await done.text()}`);
console.log(JSON.stringify({ ms: performance.now() - started, chunksMs: uploaded - started, finalizeMs: performance.now() - uploaded, bytes: size }));
