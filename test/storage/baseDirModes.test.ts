// What kiln keeps under baseDir is owner-only, except PostgreSQL's own directory, which the
// embedded server (unprivileged when kiln is root) must reach through baseDir's o+x.
import t from 'tap';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { secureBaseDir } from '../../storage/index.js';
import { startTestKiln } from '../support/kiln.js';

const modeOf = (path: string) => statSync(path).mode & 0o777;

/** A baseDir as an older kiln left it: world-readable blobs and staging, a readable file, PostgreSQL's directory. */
function olderBaseDir(): string {
  const baseDir = mkdtempSync(join(tmpdir(), 'kiln-modes-'));
  chmodSync(baseDir, 0o701); // the o+x localDb gives
  for (const name of ['blobs', 'staging', 'worker', 'postgres']) {
    mkdirSync(join(baseDir, name));
    chmodSync(join(baseDir, name), 0o755);
  }
  writeFileSync(join(baseDir, 'notes'), 'x', { mode: 0o644 });
  chmodSync(join(baseDir, 'notes'), 0o644);
  return baseDir;
}

t.test('every entry but postgres loses its group and other bits; the server\'s directories are made 0700', async (t) => {
  const baseDir = olderBaseDir();
  const changed = await secureBaseDir(baseDir);
  t.same(changed.sort(), ['blobs', 'notes', 'staging', 'worker'].map((n) => join(baseDir, n)));
  for (const name of ['blobs', 'staging', 'worker']) t.equal(modeOf(join(baseDir, name)), 0o700, name);
  t.equal(modeOf(join(baseDir, 'notes')), 0o600);
  t.equal(modeOf(join(baseDir, 'postgres')), 0o755, 'PostgreSQL\'s directory is its own business');
  t.equal(modeOf(baseDir), 0o701, 'baseDir keeps the search bit the embedded PostgreSQL needs');
  t.same(await secureBaseDir(baseDir), [], 'a second start changes nothing');
});

t.test('a new baseDir is created 0700', async (t) => {
  const baseDir = join(mkdtempSync(join(tmpdir(), 'kiln-modes-')), 'fresh', 'base');
  await secureBaseDir(baseDir);
  t.equal(modeOf(baseDir), 0o700);
  t.same(readdirSync(baseDir).sort(), ['blobs', 'staging'], 'only the directories a server uses (no proto-staging/)');
});

t.test('kiln serve tightens an older baseDir before it starts', async (t) => {
  const baseDir = olderBaseDir();
  await startTestKiln(t, { baseDir });
  for (const name of ['blobs', 'staging', 'worker']) t.equal(modeOf(join(baseDir, name)), 0o700, name);
  t.equal(modeOf(join(baseDir, 'notes')), 0o600);
});
