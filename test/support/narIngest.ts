// The NAR ingest front door (services/caches/narIngest.ts) on a test kiln's real parts: its storage, its
// UploadBudget actor, its events; for tests that drive a path (a /proto push) without HTTP.
import { uploadBudgetMachine, type UploadBudgetRef } from '../../actors/index.js';
import { cacheSigningKeys, cacheStorageLimits, narIngest, type NarIngest } from '../../services/index.js';
import { openSecretBox } from '../../storage/index.js';
import type { TestKiln } from './kiln.js';

export interface TestNarIngest {
  ingest: NarIngest;
  /** the kiln's UploadBudget actor, which the front door asks for permits */
  budget: UploadBudgetRef & { getSnapshot(): { context: { waiting: readonly unknown[]; granted: readonly unknown[] } } };
}

export async function testNarIngest(kiln: TestKiln, options: { maxStorageGb?: number; restWaitSecs?: number } = {}): Promise<TestNarIngest> {
  const budget = kiln.root.lookup('upload-budget', uploadBudgetMachine);
  if (!budget) throw new Error('the test kiln has no upload budget actor');
  const secretBox = await openSecretBox(kiln.sql, { baseDir: kiln.baseDir, 'secrets.cryptFile': null });
  const ingest = narIngest({
    nars: kiln.nars, keys: cacheSigningKeys(kiln.sql, secretBox), uploadBudget: budget, restWaitSecs: options.restWaitSecs ?? 1,
    storageLimits: cacheStorageLimits(kiln.sql, options.maxStorageGb ?? 0), events: kiln.events.events,
  });
  return { ingest, budget };
}
