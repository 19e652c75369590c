// The Node options of the server's worker threads (the CPU pool, the serving threads).
//
// Worker threads do not inherit the tsx loader that bin/kiln.js registers with module.register():
// measured on Node 22.23 with tsx 4, a worker then loads its module through Node's own type
// stripping but fails on its first `./x.js` import that names a .ts file. Passing tsx's loader in
// execArgv makes workers resolve and transform exactly as the main thread does; when the process
// was started with `--import tsx` already (tap, `node --import tsx`), registering twice is harmless.
//
// The V8 options of the process (`kiln serve` runs with two, bin/serveFlags.js; an operator may add
// heap sizes) already hold for every isolate of the process, and `new Worker` refuses them in
// execArgv (ERR_WORKER_INVALID_EXEC_ARGV): they are left out.
const V8_OPTION = /^--(?:max[-_](?:semi[-_]space|old[-_]space|young[-_]generation)[-_]size(?:=|$)|(?:no[-_])?optimize[-_]for[-_]size$)/;

export const threadExecArgv = (execArgv: readonly string[] = process.execArgv): string[] =>
  [...execArgv.filter((arg) => !V8_OPTION.test(arg)), '--import', import.meta.resolve('tsx')];
