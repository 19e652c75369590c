// The bounds of a serving thread's memory of medium NAR files (http/serving/mediumNarMemory.ts,
// threadNars.ts; review r6b): many requests for one file that all waited for its grant hold one copy
// of it, not one each; a request for a range does not keep its file.
import { request as httpRequest } from 'node:http';
import { randomBytes } from 'node:crypto';
import t, { type Test } from 'tap';
import { startTestKiln, type TestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { makeTestNar } from '../../support/narStorage.js';
import { uploadSingle } from '../../support/narUploads.js';
import { threadNodes, threadSum } from '../../support/servingThreads.js';
import type { ReadPaceLimits } from '../../../storage/threadFace.js';

const MiB = 1 << 20;
const NO_PACE: ReadPaceLimits = { minBytesPerSec: 1, checkMs: 3_600_000 };

interface Got { status: number; bytes: number; complete: boolean }

/** One GET on a connection of its own; its body is not read for `pauseMs` after the head (the bytes wait on the thread). */
function get(url: string, headers: Record<string, string> = {}, pauseMs = 0): Promise<Got> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { agent: false, headers: { connection: 'close', ...headers } }, (res) => {
      let bytes = 0;
      if (pauseMs > 0) {
        res.pause();
        setTimeout(() => res.resume(), pauseMs);
      }
      res.on('data', (c: Buffer) => { bytes += c.length; });
      res.on('close', () => resolve({ status: res.statusCode ?? 0, bytes, complete: res.complete }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A public cache with one medium file (random bytes: about 3 MiB stored) of its own per call. */
async function medium(t: Test, kiln: TestKiln, token: string, name: string): Promise<{ url: string; size: number }> {
  const nar = await makeTestNar(t, { blob: randomBytes(3 * MiB) }, [], name);
  const uploaded = await uploadSingle(kiln, token, 'open', {
    narinfo: { store_path: nar.info.storePath, nar_hash: nar.info.narHash, nar_size: nar.info.narSize, references: [] }, nar: nar.nar,
  });
  t.equal(uploaded.status, 200, JSON.stringify(uploaded.body));
  const [stored] = await kiln.sql<{ file_hash: string; file_size: string }[]>`select file_hash, file_size from cached_paths where hash_part = ${nar.hash}`;
  return { url: `${kiln.url}/cache/open/nar/${stored!.file_hash}.nar.zst`, size: Number(stored!.file_size) };
}

async function serve(t: Test): Promise<{ kiln: TestKiln; token: string }> {
  const kiln = await startTestKiln(t, { 'http.threads': 2 }, { narReadPace: NO_PACE });
  const owner = await signUp(kiln, 'owner');
  await createTestCache(kiln.sql, 'open', { public: true, ownerId: owner.id });
  return { kiln, token: owner.token };
}

const perThread = (kiln: TestKiln, field: string): number[] => threadNodes(kiln.root.inspect()).map((n) => Number(n.summary?.[field] ?? 0));

t.test('many requests that waited for one grant hold one copy of the file, not one each', async (t) => {
  const { kiln, token } = await serve(t);
  const file = await medium(t, kiln, token, 'many');
  t.ok(file.size > MiB && file.size <= 4 * MiB, 'a medium file');
  const baseline = perThread(kiln, 'externalBytes');
  const peak = baseline.slice();
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      perThread(kiln, 'externalBytes').forEach((bytes, i) => { peak[i] = Math.max(peak[i]!, bytes); });
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  // No thread holds the file's grant yet: each thread's requests all wait for its one ask. Their
  // readers do not read for 3 s, so whatever each request holds is held while the counters are written.
  const answers = await Promise.all(Array.from({ length: 60 }, () => get(file.url, {}, 3000)));
  sampling = false;
  await sampler;
  t.ok(answers.every((a) => a.status === 200 && a.complete && a.bytes === file.size), 'every reader got the whole file');
  t.ok(threadSum(kiln.root.inspect(), 'narsWaited') > 0, 'requests waited for a grant');
  const grown = peak.map((p, i) => p - baseline[i]!);
  t.ok(grown.every((g) => g < 3 * file.size), `each thread's external memory grew by less than three copies of the file (${grown.map((g) => (g / MiB).toFixed(1)).join(', ')} MiB; one copy ${(file.size / MiB).toFixed(1)} MiB)`);
  t.ok(perThread(kiln, 'mediumNarBytes').every((b) => b === 0 || b === file.size), 'each thread keeps the file once');
});

t.test('a request for a range does not keep its file; a whole one does', async (t) => {
  const { kiln, token } = await serve(t);
  const file = await medium(t, kiln, token, 'ranged');
  const parts = await Promise.all(Array.from({ length: 12 }, () => get(file.url, { range: 'bytes=0-0' })));
  t.ok(parts.every((a) => a.status === 206 && a.bytes === 1), 'one byte each');
  t.equal(threadSum(kiln.root.inspect(), 'mediumNarBytes'), 0, 'no thread kept the file for a range');
  const whole = await Promise.all(Array.from({ length: 12 }, () => get(file.url)));
  t.ok(whole.every((a) => a.status === 200 && a.bytes === file.size));
  t.ok(threadSum(kiln.root.inspect(), 'mediumNarBytes') >= file.size, 'whole reads keep it');
});
