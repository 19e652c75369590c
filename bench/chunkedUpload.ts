// The client side of the ingest bench, run as its own process (the server's process must keep its
// event loop): the CLI's own uploadNar PUTs a NAR file in 32 MiB chunks and finalizes it, then
// this prints the elapsed times as JSON: {ms, chunksMs, finalizeMs, bytes, cpuMs}. chunksMs ends when
// the server has acknowledged the last chunk (uploadNar's progress reaching the NAR's size),
// finalizeMs is the rest; cpuMs is this process's user+system CPU over the upload (after loading).
//   node --import tsx bench/chunkedUpload.ts <server URL> <token> <cache> <nar file> <narinfo JSON>
import { stat } from 'node:fs/promises';
import { ApiClient } from '../cli/apiClient.js';
import { narFileSource, uploadNar } from '../cli/narUpload.js';
import type { NarUploadInfo } from '../protocol/index.js';

const [server, token, cache, file, narinfo] = process.argv.slice(2);
if (narinfo === undefined) throw new Error('usage: chunkedUpload.ts <server URL> <token> <cache> <nar file> <narinfo JSON>');
const cpu0 = process.cpuUsage();
const started = performance.now();
const size = (await stat(file!)).size;
// KILN_BENCH_SOURCE=stream: the NAR as a stream of 1 MiB pieces (as `nix-store --dump` gives one).
const fromFile = narFileSource(file!, size);
const source = process.env['KILN_BENCH_SOURCE'] === 'stream' ? { size, open: fromFile.open } : fromFile;
let uploaded = started;
await uploadNar(new ApiClient({ server: server!, token: token! }), cache!, JSON.parse(narinfo) as NarUploadInfo, source, {
  progress: {
    update: (done) => {
      if (done >= size) uploaded = performance.now();
    },
    finish: () => undefined,
  },
});
const done = performance.now();
const cpu = process.cpuUsage(cpu0);
console.log(JSON.stringify({ ms: done - started, chunksMs: uploaded - started, finalizeMs: done - uploaded, bytes: size, cpuMs: (cpu.user + cpu.system) / 1000 }));
