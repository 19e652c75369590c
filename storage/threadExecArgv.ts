// The Node options of the server's worker threads (the CPU pool, the serving threads).
//
// Worker threads do not inherit the tsx loader that bin/kiln.js registers with module.register():
// measured on Node 22.23 with tsx 4, a worker then loads its module through Node's own type
// stripping but fails on its first `./x.js` import that names a .ts file. Passing tsx's loader in
// execArgv makes workers resolve and transform exactly as the main thread does; when the process
// was started with `--import tsx` already (tap, `node --import tsx`), registering twice is harmless.
//
// The process's V8 heap options (`kiln serve` runs with one, bin/serveFlags.js; an operator may
// add more) already size every isolate of the process, and `new Worker` refuses them in execArgv
// (ERR_WORKER_INVALID_EXEC_ARGV): they are left out.
const V8_HEAP_OPTION = /^--max[-_](?:semi[-_]space|old[-_]space|young[-_]generation)[-_]size(?:=|$)/;

export const threadExecArgv = (execArgv: readonly string[] = process.execArgv): string[] =>
  [...execArgv.filter((arg) => !V8_HEAP_OPTION.test(arg)), '--import', import.meta.resolve('tsx')];
