// The worker's fetch of an uploaded source (`kiln build`, worker/sourceFetch.ts) from a real kiln
// server's capability URL, unpacked by real Nix: the bytes must have the SHA-256 the server recorded
// (else nothing is unpacked and the job fails with fetch_failed naming both hashes), and an upload
// that is gone by the time the worker asks (expired: the server answers 404) fails the job with
// the server's answer rather than anything read from its error body.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fetchSource } from '../../worker/sourceFetch.js';
import { signUp } from '../support/accounts.js';
import { startTestKiln } from '../support/kiln.js';
import { nixEnv, requireNix, tempDir } from '../support/nixStore.js';
import { TEST_NIX_CONFIG } from '../support/workerProcess.js';

requireNix();
const dir = tempDir('kiln-source-fetch-');
const env: NodeJS.ProcessEnv = { ...nixEnv(), NIX_CONFIG: TEST_NIX_CONFIG };
const signal = new AbortController().signal;

/** A gzip tarball of one top-level directory holding a flake, unique to this run (so its store path is new). */
function flakeTarball(): { bytes: Buffer; marker: string } {
  const marker = randomUUID();
  const tree = join(dir, `tree-${marker}`, 'src');
  mkdirSync(tree, { recursive: true });
  writeFileSync(join(tree, 'flake.nix'), `{ outputs = _: { marker = "${marker}"; }; }\n`);
  const file = join(dir, `source-${marker}.tar.gz`);
  execFileSync('tar', ['-czf', file, '-C', join(tree, '..'), 'src']);
  return { bytes: readFileSync(file), marker };
}

t.test('fetching an uploaded source', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } });
  await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'app', repository: 'file:///nonexistent' } });
  const upload = async (bytes: Buffer) => {
    const res = await fetch(`${kiln.url}/api/v1/build-requests/source?project=acme/app`, { method: 'POST', body: bytes, headers: { authorization: `Bearer ${ada.token}`, 'content-type': 'application/gzip' } });
    const json = (await res.json()) as { message: { id: string; url: string; sha256: string } };
    t.equal(res.status, 200, JSON.stringify(json.message));
    return json.message;
  };

  t.test('the recorded SHA-256: unpacked into the store as a locked flake', async (t) => {
    const { bytes, marker } = flakeTarball();
    const made = await upload(bytes);
    t.equal(made.sha256, createHash('sha256').update(bytes).digest('hex'));
    const got = await fetchSource(join(dir, 'worker'), { url: made.url, sha256: made.sha256 }, env, signal);
    if (!got.ok) return t.fail(got.failure.message);
    t.match(got.flakeRef, /^path:\/nix\/store\/[0-9a-z]{32}-source\?narHash=sha256-/);
    t.match(readFileSync(join(got.clone, 'flake.nix'), 'utf8'), marker, 'the top-level directory is stripped');
  });

  t.test('another SHA-256 than the recorded one: fetch_failed, nothing unpacked', async (t) => {
    const { bytes, marker } = flakeTarball();
    const made = await upload(bytes);
    const recorded = createHash('sha256').update('something else').digest('hex');
    const got = await fetchSource(join(dir, 'worker'), { url: made.url, sha256: recorded }, env, signal);
    t.notOk(got.ok, 'refused');
    if (got.ok) return;
    t.equal(got.failure.reason, 'fetch_failed');
    t.match(got.failure.message, `SHA-256 is ${made.sha256}, not the ${recorded} the server recorded`);
    // What Nix would have named the tree had it been unpacked: the same tarball, added the way the worker adds it.
    const unpackedElsewhere = execFileSync('nix-prefetch-url', ['--unpack', '--print-path', '--name', 'source', `file://${join(dir, `source-${marker}.tar.gz`)}`], { env, encoding: 'utf8' }).trim().split('\n')[1]!;
    execFileSync('nix-store', ['--delete', unpackedElsewhere], { env, stdio: 'ignore' });
    t.notOk(existsSync(unpackedElsewhere), 'the refused tree is not in the store');
  });

  t.test('an upload gone before the worker asks: fetch_failed with the server\'s answer', async (t) => {
    const { bytes } = flakeTarball();
    const made = await upload(bytes);
    await kiln.sql`update source_uploads set expires_at = now() - interval '1 minute' where id = ${made.id}`;
    const got = await fetchSource(join(dir, 'worker'), { url: made.url, sha256: made.sha256 }, env, signal);
    t.notOk(got.ok, 'refused');
    if (got.ok) return;
    t.equal(got.failure.reason, 'fetch_failed');
    t.match(got.failure.message, /downloading the uploaded source failed: the server answered 404/);
  });
});
