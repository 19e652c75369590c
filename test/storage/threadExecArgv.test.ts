// The server's worker threads start with the process's Node options less what `new Worker` refuses
// (V8 options, which hold for every isolate of the process anyway, and whole-process options).
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

t.test('any option a worker refuses is left out, found by asking Node (review h48: --single-threaded-gc crash-looped the serving threads)', async (t) => {
  const execArgv = threadExecArgv(['--single-threaded-gc', '--min-semi-space-size=16', '--stack-size=2000', '--stack-trace-limit=50', '--experimental-wasm-stringref', '--title=kiln', '--expose-gc', '--enable-source-maps', '--import', 'tsx', '-C', 'development', '--no-warnings']);
  t.same(execArgv.slice(0, 6), ['--enable-source-maps', '--import', 'tsx', '-C', 'development', '--no-warnings'], 'the Node options kept, with their values; the refused ones (V8 options with Node-like names too) left out');
  const worker = new Worker("require('node:worker_threads').parentPort.postMessage('up')", { eval: true, execArgv });
  t.equal(await new Promise((resolve, reject) => worker.once('message', resolve).once('error', reject)), 'up');
  await worker.terminate();
});

t.test('an option outside the known Node options that a worker takes is kept', async (t) => {
  t.same(threadExecArgv(['--pending-deprecation']).slice(0, 1), ['--pending-deprecation']);
  t.same(threadExecArgv(['--title', 'x', '--dns-result-order', 'ipv4first']).slice(0, 2), ['--dns-result-order', 'ipv4first'], 'an option and its value asked together');
});
