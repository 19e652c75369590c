// worker.nar.partialTtlSecs (docs/worker.md, "Unfinished downloads"): what a worker killed mid-download
// left under its base directory goes once nothing in it was written for the TTL; anything else there,
// and anything written since, stays.
import t from 'tap';
import { lutimes, mkdir, mkdtemp, readdir, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sweepPartialDownloads } from '../../worker/partialDownloads.js';

const HOUR = 3_600_000;

t.test('abandoned downloads older than the TTL are removed, nothing else', async (t) => {
  const base = await mkdtemp(join(tmpdir(), 'kiln-partial-'));
  t.teardown(() => import('node:fs/promises').then(({ rm }) => rm(base, { recursive: true, force: true })));
  const now = new Date('2026-11-27T12:00:00Z');
  const at = async (path: string, ageMs: number) => {
    const when = new Date(now.getTime() - ageMs);
    await utimes(path, when, when);
  };
  await mkdir(join(base, 'tmp'), { recursive: true });
  await mkdir(join(base, 'nar-partial'), { recursive: true });
  await mkdir(join(base, 'repos', 'p'), { recursive: true });
  // a source tarball a killed worker left, two days old
  await writeFile(join(base, 'tmp', 'source-old'), 'x');
  await at(join(base, 'tmp', 'source-old'), 48 * HOUR);
  // one being downloaded now
  await writeFile(join(base, 'tmp', 'source-live'), 'x');
  await at(join(base, 'tmp', 'source-live'), 1000);
  // a scratch clone whose top directory is old but a file deep inside was just written
  await mkdir(join(base, 'tmp', 'open-pr-busy', '.git', 'objects'), { recursive: true });
  await writeFile(join(base, 'tmp', 'open-pr-busy', '.git', 'objects', 'pack'), 'x');
  await at(join(base, 'tmp', 'open-pr-busy', '.git', 'objects', 'pack'), 60_000);
  await at(join(base, 'tmp', 'open-pr-busy', '.git', 'objects'), 48 * HOUR);
  await at(join(base, 'tmp', 'open-pr-busy', '.git'), 48 * HOUR);
  await at(join(base, 'tmp', 'open-pr-busy'), 48 * HOUR);
  // an abandoned scratch clone, all of it old
  await mkdir(join(base, 'tmp', 'open-pr-dead', 'sub'), { recursive: true });
  await writeFile(join(base, 'tmp', 'open-pr-dead', 'sub', 'f'), 'x');
  for (const p of ['sub/f', 'sub', '']) await at(join(base, 'tmp', 'open-pr-dead', p), 30 * HOUR);
  // a flake input a killed worker was restoring from the shared evaluation cache
  await mkdir(join(base, 'tmp', 'input-old'), { recursive: true });
  await writeFile(join(base, 'tmp', 'input-old', 'nar'), 'x');
  for (const p of ['nar', '']) await at(join(base, 'tmp', 'input-old', p), 30 * HOUR);
  // something else in tmp, and a clone under repos/, both old: not downloads the option covers
  await writeFile(join(base, 'tmp', 'notes'), 'x');
  await at(join(base, 'tmp', 'notes'), 48 * HOUR);
  await at(join(base, 'repos', 'p'), 48 * HOUR);
  // nar-partial: one just past the TTL, one just inside it
  await writeFile(join(base, 'nar-partial', 'past'), 'x');
  await at(join(base, 'nar-partial', 'past'), 24 * HOUR);
  await writeFile(join(base, 'nar-partial', 'inside'), 'x');
  await at(join(base, 'nar-partial', 'inside'), 24 * HOUR - 1000);

  const removed = await sweepPartialDownloads(base, 24 * HOUR, now);
  t.same(removed.map((p) => p.slice(base.length + 1)).sort(), ['nar-partial/past', 'tmp/input-old', 'tmp/open-pr-dead', 'tmp/source-old']);
  t.same((await readdir(join(base, 'tmp'))).sort(), ['notes', 'open-pr-busy', 'source-live']);
  t.same(await readdir(join(base, 'nar-partial')), ['inside']);
  t.same(await readdir(join(base, 'repos')), ['p']);
});

t.test('a base directory without those folders is swept without error', async (t) => {
  const base = await mkdtemp(join(tmpdir(), 'kiln-partial-empty-'));
  t.same(await sweepPartialDownloads(join(base, 'missing'), HOUR, new Date()), []);
});

t.test('the sweep never follows a symlink out of the base directory', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'kiln-partial-links-'));
  t.teardown(() => rm(root, { recursive: true, force: true }));
  const base = join(root, 'base');
  const outside = join(root, 'outside');
  const now = new Date('2026-11-27T12:00:00Z');
  const old = new Date(now.getTime() - 48 * HOUR);
  await mkdir(join(base, 'tmp', 'open-pr-dead'), { recursive: true });
  await mkdir(join(outside, 'deep'), { recursive: true });
  // outside: a file written just now, old files, and a link back into the base (a loop)
  await writeFile(join(outside, 'deep', 'fresh'), 'x');
  await writeFile(join(outside, 'kept'), 'x');
  await utimes(join(outside, 'kept'), old, old);
  await symlink(base, join(outside, 'deep', 'loop'));
  // a hostile repository's clone holds a link to the outside tree; all of the clone is old
  await symlink(outside, join(base, 'tmp', 'open-pr-dead', 'escape'));
  await lutimes(join(base, 'tmp', 'open-pr-dead', 'escape'), old, old);
  await utimes(join(base, 'tmp', 'open-pr-dead'), old, old);
  // nar-partial is a link to the outside tree: its old files are not the worker's downloads
  await symlink(outside, join(base, 'nar-partial'));

  const removed = await sweepPartialDownloads(base, 24 * HOUR, now);
  t.same(removed.map((p) => p.slice(base.length + 1)), ['tmp/open-pr-dead'], 'the clone is old by its own entries, not by what its link points at');
  t.same((await readdir(outside)).sort(), ['deep', 'kept']);
  t.same((await readdir(join(outside, 'deep'))).sort(), ['fresh', 'loop']);
});
