// A whole read of a file to keep that stalls holds no request for long (http/serving/threadNars.ts;
// review r7a-3): past nar.storageOpenTimeoutSecs its reader is refused 503 storage_busy, as the
// route refuses, its room in memory is given back, and the requests that waited for its bytes read
// the file themselves. threadNars runs in a real uWS app of this process; the test plays the main
// thread and opens the file for it, the first open's whole read never ending (storage stalled).
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import uWS, { type us_listen_socket } from 'uWebSockets.js';
import { openFile } from '../../../http/serving/filePieces.js';
import { originAgent } from '../../../http/serving/forwardHttp.js';
import { NarMemory } from '../../../http/serving/narMemory.js';
import { ThreadAnswers } from '../../../http/serving/threadAnswers.js';
import { COUNTER_NARS_WAITED, COUNTERS } from '../../../http/serving/threadMessages.js';
import { threadNars } from '../../../http/serving/threadNars.js';
import { DEFAULT_READ_PACE } from '../../../storage/threadFace.js';

const FILE = '2'.repeat(52);
const bytes = Buffer.from('a stored NAR file whose first whole read stalls');
const dir = mkdtempSync(join(tmpdir(), 'kiln-nar-stalled-'));
const path = join(dir, `${FILE}.nar.zst`);
writeFileSync(path, bytes);

t.setTimeout(60_000); // before: the stalled reader and everyone after it waited for ever

t.test('a stalled whole read: its reader is refused in time, the others read the file themselves', async (t) => {
  const counters = new Float64Array(new SharedArrayBuffer(COUNTERS * Float64Array.BYTES_PER_ELEMENT));
  const origin = { port: 1, secret: 'unused', agent: originAgent() };
  const asks: number[] = [];
  const small = new NarMemory({ minFileBytes: 0, maxFileBytes: 1 << 20, budget: 4 << 20, idleMs: 0 });
  let opens = 0;
  let wholeReads = 0;
  const nars = threadNars({
    origin, line: null, openTimeoutSecs: 1, pace: DEFAULT_READ_PACE, enabled: true, counters,
    answers: new ThreadAnswers(() => undefined, false), small, medium: new NarMemory({ minFileBytes: 0, maxFileBytes: 0, budget: 0, idleMs: 0 }),
    ask: (id) => asks.push(id), report: () => undefined,
    open: async (at) => {
      const file = await openFile(at);
      if (file === null) return null;
      if (++opens > 1) return { ...file, whole: () => (wholeReads++, file.whole()) };
      file.close();
      return { ...file, whole: () => new Promise<Buffer>(() => undefined) };
    },
  });
  const app = uWS.App().get('/cache/:cache/nar/:file', (res, req) => nars.answer(res, req, false));
  const listen = await new Promise<us_listen_socket>((resolve, reject) => {
    app.listen('127.0.0.1', 0, (socket) => (socket === false ? reject(new Error('cannot listen')) : resolve(socket)));
  });
  t.teardown(() => {
    uWS.us_listen_socket_close(listen);
    app.close();
    origin.agent.destroy();
  });
  const url = `http://127.0.0.1:${uWS.us_socket_local_port(listen)}/cache/pub/nar/${FILE}.nar.zst`;
  const get = () => fetch(url).then(async (res) => ({ status: res.status, body: Buffer.from(await res.arrayBuffer()) }));

  const first = get();
  while (counters[COUNTER_NARS_WAITED] === 0) await new Promise((r) => setTimeout(r, 2));
  nars.granted(asks.pop()!, { cacheId: 'c1', cache: 'pub', fileHash: FILE, fileSize: bytes.length, path });
  while (opens === 0) await new Promise((r) => setTimeout(r, 2));
  const others = [get(), get()]; // under the live grant: they wait for the first one's read

  const refused = await first;
  t.equal(refused.status, 503, 'the reader of the stalled read is refused');
  t.equal((JSON.parse(refused.body.toString()) as { code: string }).code, 'storage_busy');
  for (const answer of await Promise.all(others)) {
    t.equal(answer.status, 200, 'a waiter reads the file itself');
    t.ok(answer.body.equals(bytes), 'the whole file');
  }
  t.equal(wholeReads, 1, 'one of the waiters read it whole, for both: one read at a time per file');
  t.equal(small.bytes, bytes.length, 'the stalled read\'s room was given back: the file is kept once');
});
