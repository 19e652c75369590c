// A worker thread's entry compiled ahead (storage/threadEntry.ts): built once, found again while its
// inputs are unchanged, rebuilt when any changes, and the TypeScript entry when it cannot be built.
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import t from 'tap';
import { compiledThreadEntry, threadExecArgv } from '../../storage/index.js';

/** What a worker started from `url` (with the options a compiled entry gets) posts first. */
function runWorker(url: URL, typescript: boolean): Promise<unknown> {
  const worker = new Worker(url, { execArgv: threadExecArgv(process.execArgv, { typescript }) });
  return new Promise((resolve, reject) => worker.once('message', resolve).once('error', reject)).finally(() => void worker.terminate());
}

t.test('built at the first start, reused while unchanged, rebuilt after an edit', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'kiln-thread-entry-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const cacheDir = join(dir, 'cache');
  // a TypeScript entry importing a sibling by its .js name, as kiln's modules do
  await writeFile(join(dir, 'entry.ts'), "import { parentPort } from 'node:worker_threads';\nimport { answer } from './answer.js';\nconst said: string = answer();\nparentPort!.postMessage(said);\n");
  await writeFile(join(dir, 'answer.ts'), "export function answer(): string { return 'first'; }\n");
  const entry = pathToFileURL(join(dir, 'entry.ts'));

  const first = await compiledThreadEntry(entry, { cacheDir });
  t.same({ typescript: first.typescript, built: first.built, fallback: first.fallback }, { typescript: false, built: true, fallback: null });
  t.ok(first.url.pathname.startsWith(pathToFileURL(cacheDir).pathname) && first.url.pathname.endsWith('.mjs'), 'a JavaScript file in the cache');
  t.equal(await runWorker(first.url, false), 'first', 'the compiled entry runs without tsx');

  const again = await compiledThreadEntry(entry, { cacheDir });
  t.same({ url: again.url.href, built: again.built }, { url: first.url.href, built: false }, 'unchanged inputs: the same bundle, not built again');

  await writeFile(join(dir, 'answer.ts'), "export function answer(): string { return 'second'; }\n");
  const edited = await compiledThreadEntry(entry, { cacheDir });
  t.equal(edited.built, true, 'an imported file changed: built again');
  t.not(edited.url.href, first.url.href);
  t.equal(await runWorker(edited.url, false), 'second', 'the new bundle has the edit');
  t.equal((await readdir(cacheDir)).filter((name) => name.endsWith('.mjs')).length, 2, 'the older bundle is kept for a day (a running server may restart a thread from it)');
});

t.test('an entry that cannot be built is run as TypeScript through tsx', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'kiln-thread-entry-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'entry.ts'), "import { parentPort } from 'node:worker_threads';\nimport { missing } from './missing.js';\nparentPort!.postMessage(missing);\n");
  const entry = pathToFileURL(join(dir, 'entry.ts'));
  const fallback = await compiledThreadEntry(entry, { cacheDir: join(dir, 'cache') });
  t.same({ url: fallback.url.href, typescript: fallback.typescript, built: fallback.built }, { url: entry.href, typescript: true, built: false });
  t.match(fallback.fallback, /missing/, 'the reason names what failed');
});

t.test("the serving thread's entry compiles (http/serving/servingThread.ts, with uWS left to Node)", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'kiln-thread-entry-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const entry = await compiledThreadEntry(new URL('../../http/serving/servingThread.ts', import.meta.url), { cacheDir: join(dir, 'cache'), external: ['uWebSockets.js'] });
  t.equal(entry.fallback, null);
  t.equal(entry.typescript, false);
});
