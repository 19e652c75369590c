// worker.system.cpuCoreScore null: the start-up benchmark (worker/cpuCoreScore.ts).
import t from 'tap';
import { measureCpuCoreScore } from '../../worker/cpuCoreScore.js';

/** a clock on which every sort takes `ms` milliseconds, the slowest rounds first */
function clock(...roundsMs: number[]): () => number {
  let time = 0;
  let calls = 0;
  return () => {
    const round = Math.floor(calls / 2);
    if (calls++ % 2 === 1) time += roundsMs[Math.min(round, roundsMs.length - 1)]!;
    return time;
  };
}

t.test('1,000 is a 16 ms sort; the fastest round counts', async (t) => {
  t.equal(measureCpuCoreScore({ now: clock(16), rounds: 3 }), 1000);
  t.equal(measureCpuCoreScore({ now: clock(8), rounds: 3 }), 2000, 'twice as fast scores twice as much');
  t.equal(measureCpuCoreScore({ now: clock(64, 40, 32, 50), rounds: 4 }), 500, 'a busy round does not lower the score');
  t.equal(measureCpuCoreScore({ now: clock(1e9), rounds: 1 }), 1, 'a score is at least 1 (the handshake takes positive ints)');
});

t.test('a real measurement is a positive integer', async (t) => {
  const score = measureCpuCoreScore({ rounds: 2 });
  t.ok(Number.isInteger(score) && score > 0, `score ${score}`);
});
