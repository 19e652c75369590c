// The Node options of the server's worker threads (the CPU pool, the serving threads).
//
// Worker threads do not inherit the tsx loader that bin/kiln.js registers with module.register():
// measured on Node 22.23 with tsx 4, a worker then loads its module through Node's own type
// stripping but fails on its first `./x.js` import that names a .ts file. Passing tsx's loader in
// execArgv makes workers resolve and transform exactly as the main thread does; when the process
// was started with `--import tsx` already (tap, `node --import tsx`), registering twice is harmless.
//
// The V8 options of the process (`kiln serve` runs with some, bin/serveFlags.js; an operator may
// add any: heap sizes, `--single-threaded-gc`, `--stack-size`) already hold for every isolate of the
// process, and `new Worker` refuses them in execArgv (ERR_WORKER_INVALID_EXEC_ARGV), as it refuses
// options that affect the whole process (`--title`): they are left out. No list of V8's options is
// kept here (an option missing from one made the serving threads crash-loop, so the server never
// listened): an option outside the Node options every kiln process uses is asked of Node itself,
// by starting a worker with it alone; a refusal is synchronous and costs nothing, an accepted one
// one short-lived thread, once per process and option.
import { Worker } from 'node:worker_threads';

/**
 * Node options every kiln process may run with that a worker takes (the loaders, source maps,
 * profiling): kept without asking. Nothing with a V8 namesake (`--stack-trace-limit` is V8's, and so
 * are `--experimental-wasm-*`): those are asked (review r5d-5).
 */
const NODE_OPTION = /^(?:--(?:import|require|loader|experimental-loader|conditions|enable-source-maps|no-warnings|cpu-prof|heap-prof|inspect)\b|-r$|-C$)/;
const accepted = new Map<string, boolean>();

/** Whether a worker takes `option` (one argument, or an option and its value as Node was given them). */
function workerAccepts(option: readonly string[]): boolean {
  const key = option.join('\0');
  let known = accepted.get(key);
  if (known === undefined) {
    try {
      const probe = new Worker('', { eval: true, execArgv: [...option] });
      // a worker that fails to start must not take the process down with an unheard 'error'
      probe.on('error', () => undefined);
      probe.unref();
      void probe.terminate();
      known = true;
    } catch (error) {
      if ((error as { code?: string }).code !== 'ERR_WORKER_INVALID_EXEC_ARGV') throw error;
      known = false;
    }
    accepted.set(key, known);
  }
  return known;
}

export function threadExecArgv(execArgv: readonly string[] = process.execArgv): string[] {
  const kept: string[] = [];
  for (let i = 0; i < execArgv.length; i++) {
    const arg = execArgv[i]!;
    // an option's value given as the next argument (`--import tsx`) goes with it
    const value = !arg.includes('=') && i + 1 < execArgv.length && !execArgv[i + 1]!.startsWith('-') ? execArgv[i + 1]! : null;
    if (NODE_OPTION.test(arg) || workerAccepts(value === null ? [arg] : [arg, value])) {
      kept.push(arg);
      if (value !== null) kept.push(value);
    }
    if (value !== null) i++;
  }
  return [...kept, '--import', import.meta.resolve('tsx')];
}
