// nar.maxConcurrentDownloads counts the serving threads' NAR reads with the main thread's (docs/
// binary-cache.md, "Storage reads"): a file a thread is sending holds the only place, so the main
// thread's route refuses with 503 storage_busy, and a read the main thread holds makes every
// thread's request wait in the main thread's line and be refused in time. A held read crawls
// (heldReads.ts): one that took nothing was cut by uWS's 10 s idle timeout when a run under load
// took longer than that, and its place came free under the readers that were to be refused (a
// CI failure: the 12 anonymous reads got 200; reproduced with a 12 s pause after the hold).
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { get } from 'node:http';
import { join } from 'node:path';
import t from 'tap';
import { crawl, holdOpen, readAll, type Crawl } from '../../support/heldReads.js';
import { signUp } from '../../support/accounts.js';
import { startTestKiln } from '../../support/kiln.js';
import { localNar, uploadIntoFreshCache } from '../../support/narUploads.js';
import { nixStoreAdd, tempDir } from '../../support/nixStore.js';
import { threadSum, type ActorNode } from '../../support/servingThreads.js';

/** One GET on a connection of its own (so that requests spread over the listeners): its status and error code. */
function fresh(url: string, headers: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    get(url, { agent: false, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const body = Buffer.concat(chunks);
        resolve(res.statusCode === 503 ? `503 ${(JSON.parse(body.toString()) as { code: string }).code}` : `${res.statusCode} ${body.length}`);
      });
    }).on('error', reject);
  });
}


t.test('storage reads of serving threads and the main thread are one count', async (t) => {
  // Nix blocks this event loop (the main thread's): prepared before the server starts.
  const dir = join(tempDir('kiln-thread-reads-'), 'big');
  mkdirSync(dir);
  writeFileSync(join(dir, 'noise'), randomBytes(24 << 20));
  const nar = localNar(nixStoreAdd(dir));
  const kiln = await startTestKiln(t, {
    'http.threads': 3,
    'nar.maxConcurrentDownloads': 1,
    'nar.storageOpenTimeoutSecs': 1,
    'nar.smallBytes': 0,
    'nar.hotCacheBytes': 0,
  });
  const ada = await signUp(kiln, 'ada');
  const { cache, answer: uploaded } = await uploadIntoFreshCache(kiln, ada, 'main', nar, 4 << 20);
  t.equal(uploaded.status, 200);
  const { file_hash, file_size } = uploaded.body.message as { file_hash: string; file_size: number };
  const narUrl = `${kiln.url}/cache/${cache}/nar/${file_hash}.nar.zst`;
  // With credentials a request always goes to the main thread's route.
  const basic = { authorization: `Basic ${Buffer.from(`ada:${ada.token}`).toString('base64')}` };
  const threadNars = async (): Promise<number> => threadSum((await kiln.api<ActorNode>('GET', '/admin/actors', { token: ada.token })).message, 'nars');

  t.test('a file a thread is sending holds the place', async (t) => {
    // The kernel spreads connections over the listeners: hold reads until a thread took one.
    let held: Crawl | null = null;
    for (let attempt = 0; attempt < 40 && held === null; attempt++) {
      const before = await threadNars();
      const res = await holdOpen(narUrl);
      t.equal(res.statusCode, 200);
      if ((await threadNars()) > before) held = crawl(res);
      else t.equal(await readAll(res), file_size);
    }
    if (held === null) return t.fail('no thread took a read in 40 tries');
    t.equal(await fresh(narUrl, basic), '503 storage_busy', 'the main thread\'s route finds no place');
    const anonymous = await Promise.all(Array.from({ length: 8 }, () => fresh(narUrl)));
    t.same(new Set(anonymous), new Set(['503 storage_busy']), 'nor does any thread');
    t.equal(await held.finish(), file_size, 'the held read delivers every byte');
    t.equal(await fresh(narUrl, basic), `200 ${file_size}`, 'its place is free once it ended');
    // One after another: with one place, four reads at once would queue past the 1 s open timeout under load.
    const after: string[] = [];
    for (let i = 0; i < 4; i++) after.push(await fresh(narUrl));
    t.same(new Set(after), new Set([`200 ${file_size}`]), 'on every listener');
  });

  t.test('a read the main thread holds makes the threads wait, then refuse', async (t) => {
    // Held on the main thread's own loopback listener, not through a thread: the main thread's read
    // ends (and gives its place back) once its bytes are in the relay's socket buffers, which
    // autotune up to tcp_rmem's 32 MiB here, so through a thread a CI run under load saw the place
    // of this 25 MB file free within 3 s. Direct, only the client's socket holds bytes (a few MB).
    const res = await holdOpen(`http://127.0.0.1:${kiln.originPort}/cache/${cache}/nar/${file_hash}.nar.zst`, basic);
    t.equal(res.statusCode, 200);
    const held = crawl(res);
    const before = await threadNars();
    const anonymous = await Promise.all(Array.from({ length: 12 }, () => fresh(narUrl)));
    t.same(new Set(anonymous), new Set(['503 storage_busy']), 'every listener refuses in time');
    t.equal(await threadNars(), before, 'no thread sent the file meanwhile');
    t.equal(await held.finish(), file_size);
    // One after another, as above: four at once would queue past the 1 s open timeout under load.
    const after: string[] = [];
    for (let i = 0; i < 4; i++) after.push(await fresh(narUrl));
    t.same(new Set(after), new Set([`200 ${file_size}`]), 'its place is free once it ended, on every listener');
  });
});
