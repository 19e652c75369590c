// The build and evaluation transition tables (actors/lifecycles.ts): every move the services make
// is in them, and moves they do not have are refused.
import t from 'tap';
import { checkBuildMove, checkEvaluationMove } from '../../actors/index.js';

t.test('builds', async (t) => {
  const moves: [Parameters<typeof checkBuildMove>[0], Parameters<typeof checkBuildMove>[1]][] = [
    [['queued'], 'started'], [['queued'], 'substituted'], [['queued'], 'failed'],
    [['started'], 'completed'], [['started'], 'failed'], [['started'], 'queued'],
    [['substituted'], 'queued'], [['completed'], 'queued'],
    [['started'], 'aborted'], [['aborted'], 'queued'],
  ];
  for (const [from, to] of moves) t.doesNotThrow(() => checkBuildMove(from, to), `${from.join('|')} → ${to}`);
  t.throws(() => checkBuildMove(['failed'], 'queued'), /cannot move from failed to queued/, 'failed is final');
  t.throws(() => checkBuildMove(['queued'], 'aborted'), /queued to aborted/, 'only a running build is aborted');
  t.throws(() => checkBuildMove(['queued'], 'completed'), /queued to completed/, 'nothing completes without starting');
  t.throws(() => checkBuildMove(['started', 'completed'], 'started'), /started to started/);
});

t.test('evaluations', async (t) => {
  const open = ['queued', 'waiting', 'approval_granted', 'fetching', 'evaluating', 'building'] as const;
  t.doesNotThrow(() => checkEvaluationMove(open, 'aborted'), 'every open phase can be aborted');
  for (const [from, to] of [['queued', 'evaluating'], ['queued', 'waiting'], ['waiting', 'queued'], ['evaluating', 'building'],
    ['evaluating', 'queued'], ['evaluating', 'failed'], ['queued', 'failed'], ['building', 'completed']] as const) {
    t.doesNotThrow(() => checkEvaluationMove([from], to), `${from} → ${to}`);
  }
  for (const final of ['completed', 'failed', 'aborted'] as const) t.throws(() => checkEvaluationMove([final], 'queued'), /cannot move/, `${final} is final`);
  t.throws(() => checkEvaluationMove(['building'], 'evaluating'), /building to evaluating/);
});
