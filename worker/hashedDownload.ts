// A download from the server into a private file, hashed as it goes: uploaded sources
// (worker/sourceFetch.ts) and shared evaluation inputs (worker/inputCache.ts) are both checked
// against the SHA-256 their job or flake.lock names.
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';

/** Downloads into `file` (mode 0600), hashing as it goes; the hex SHA-256, or a failure's words. */
export async function downloadHashed(url: string, file: string, signal: AbortSignal): Promise<{ sha256: string } | { error: string }> {
  let res: Response;
  try {
    // no redirects: the server hands out its own address only
    res = await fetch(url, { signal, redirect: 'error' });
  } catch (e) {
    return { error: e instanceof Error ? e.message : String(e) };
  }
  if (!res.ok || !res.body) return { error: `the server answered ${res.status}` };
  const hash = createHash('sha256');
  const hashing = new Transform({ transform(chunk: Buffer, _encoding, done) { hash.update(chunk); done(null, chunk); } });
  await pipeline(Readable.fromWeb(res.body), hashing, createWriteStream(file, { mode: 0o600 }), { signal });
  return { sha256: hash.digest('hex') };
}
