// The scheduler only runs passes and wires its parts: leadership (schedulerLeadership.ts),
// placement (buildPlacement.ts) and message routing (workerMessageRouter.ts) live beside it, SQL
// in the query modules and wire messages where jobs are placed.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const source = readFileSync(fileURLToPath(new URL('../../../services/builds/buildScheduler.ts', import.meta.url)), 'utf8');

t.test('services/builds/buildScheduler.ts stays small, without SQL or wire messages', async (t) => {
  t.ok(source.split('\n').length < 200, 'under 200 lines');
  t.notMatch(source, /\bsql`|\.unsafe\(|\b\w+`select\b/, 'no SQL');
  t.notMatch(source, /\.link\.send\(|\bt: '/, 'no wire message built or sent');
});
