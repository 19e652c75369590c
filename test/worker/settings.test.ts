// Worker settings derived from the configuration (worker/settings.ts).
import t from 'tap';
import { join } from 'node:path';
import { loadConfig } from '../../config/index.js';
import { workerSettings } from '../../worker/settings.js';

const settings = (overrides: Record<string, unknown>) => workerSettings(loadConfig({ scope: 'worker', env: {}, overrides }).values);

t.test('worker.gcrootsDir empty: the roots go under worker.baseDir, never nowhere', async (t) => {
  // a job's checks of the shared store hold only while what it checked is rooted (docs/builds.md, "The shared store")
  t.equal(settings({ 'worker.baseDir': '/srv/kiln-worker', 'worker.gcrootsDir': '' }).gcrootsDir, join('/srv/kiln-worker', 'gcroots'));
  t.equal(settings({ 'worker.gcrootsDir': '/nix/var/nix/gcroots/k' }).gcrootsDir, '/nix/var/nix/gcroots/k', 'a directory named is kept');
});
