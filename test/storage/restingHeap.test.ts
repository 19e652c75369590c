// Memory at rest (docs/http.md, "Memory at rest: the start-up's young generation"): the young
// generation an allocation burst grew goes back to its smallest, by shrinkHeapAtRest and at the end
// of a kiln's start-up.
import { getHeapSpaceStatistics } from 'node:v8';
import t from 'tap';
import { shrinkHeapAtRest } from '../../storage/index.js';
import { startTestKiln } from '../support/kiln.js';

const MiB = 1024 * 1024;
const youngGeneration = () => getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')!.space_size;

/** What loading ~1,000 modules does to the young generation: objects that live across a few scavenges. */
function allocationBurst(): void {
  let kept: { i: number; s: string }[][] = [];
  for (let round = 0; round < 40; round++) {
    kept.push(Array.from({ length: 50_000 }, (_, i) => ({ i, s: `x${i}` })));
    if (kept.length > 8) kept.shift();
  }
  kept = [];
}

t.test('shrinkHeapAtRest gives back the young generation a burst grew', async (t) => {
  allocationBurst();
  t.ok(youngGeneration() > 4 * MiB, `the burst grew it (${youngGeneration() / MiB} MiB)`);
  shrinkHeapAtRest();
  t.ok(youngGeneration() <= 2 * MiB, `back to ${youngGeneration() / MiB} MiB`);
  allocationBurst();
  t.ok(youngGeneration() > 4 * MiB, 'V8 grows it again under the next burst');
});

t.test('a kiln ends its start-up with the young generation at its smallest', async (t) => {
  allocationBurst();
  t.ok(youngGeneration() > 4 * MiB, `grown before the start (${youngGeneration() / MiB} MiB)`);
  // on by default; the test support turns it off for the other tests' kilns
  await startTestKiln(t, {}, { shrinkHeapAtRest: true });
  t.ok(youngGeneration() <= 2 * MiB, `after the start: ${youngGeneration() / MiB} MiB`);
});
