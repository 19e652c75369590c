// The Node options `kiln serve` runs with (docs/http.md, "Memory at rest"), in one place for
// bin/kiln.js and the benches that start a server process of their own.
//
// V8 grows each isolate's young generation (two semi-spaces) up to 16 MiB a semi-space under an
// allocation burst (loading the modules at start, a burst of requests) and a full collection does
// not give it back: measured on a server at rest with two serving threads, 30 MiB of the main
// thread's heap and ~5 MiB in each thread were empty young generation. At 2 MiB a semi-space the
// server holds 25-35 MiB less; worker threads (serving threads, the CPU pool) follow the process's
// flag.
export const SERVE_NODE_FLAGS = ['--max-semi-space-size=2'];

/** Whether the operator already chose the option (on the command line or in NODE_OPTIONS): theirs stands. */
export const setByOperator = (flag, execArgv, nodeOptions) => {
  const name = flag.split('=')[0];
  // V8 spells its options with dashes or underscores alike
  return [...execArgv, ...(nodeOptions ?? '').split(/\s+/)].map((a) => a.replace(/_/g, '-')).some((a) => a === name || a.startsWith(`${name}=`));
};
