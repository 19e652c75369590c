// The server's worker threads start with the process's Node options less its V8 options (`kiln
// serve` runs with two, bin/serveFlags.js), which `new Worker` refuses and which hold for every
// isolate of the process anyway.
import { Worker } from 'node:worker_threads';
import t from 'tap';
import { threadExecArgv } from '../../storage/index.js';

t.test('a worker starts with the options of a process that has V8 options', async (t) => {
  const execArgv = threadExecArgv(['--max-semi-space-size=2', '--optimize-for-size', '--max_old_space_size=900', '--max-young-generation-size=6', '--no-warnings']);
  t.same(execArgv.slice(0, 1), ['--no-warnings'], 'the Node option kept, the V8 options left out');
  t.equal(execArgv[1], '--import', "tsx's loader added");
  const worker = new Worker("require('node:worker_threads').parentPort.postMessage('up')", { eval: true, execArgv });
  t.equal(await new Promise((resolve, reject) => worker.once('message', resolve).once('error', reject)), 'up');
  await worker.terminate();
});
