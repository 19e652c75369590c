// The Node options and environment `kiln serve` runs with (docs/http.md, "Memory at rest"), in one place for
// bin/kiln.js and the benches that start a server process of their own. V8 options: they hold for
// every isolate of the process, the serving threads' and the CPU pool's too (which leave them out
// of their own options: storage/threadExecArgv.ts).
//
// --max-semi-space-size: V8 grows an isolate's young generation (two semi-spaces) up to 16 MiB a
// semi-space under an allocation burst (loading the modules at start, a burst of requests), and a
// full collection does not give it back: on a server at rest with two serving threads, 30 MiB of
// the main thread's heap was empty young generation. --optimize-for-size: a smaller heap for the
// same objects (~5 MiB in the main thread, ~2 in each serving thread). Together 211 → 175 MiB at
// rest and 344 → 253 MiB after the cpu-per-request runs, at the same CPU per request within the
// noise (bench/README.md).
export const SERVE_NODE_FLAGS = ['--max-semi-space-size=2', '--optimize-for-size'];

/**
 * The environment `kiln serve` runs with, each variable unless the operator set it. MALLOC_ARENA_MAX:
 * glibc gives each thread that allocates its own malloc arena (up to 8 a core), and the pages freed
 * in one arena do not serve another; with the serving threads and V8's helper threads the server
 * held 10-18 MiB more (cpu-per-request: 175 → 164 MiB at rest, 253 → 235 after the runs, CPU per
 * request within the noise).
 */
export const SERVE_ENV = { MALLOC_ARENA_MAX: '2' };

/** Whether the operator already chose the option, or its negation (on the command line or in NODE_OPTIONS): theirs stands. */
export const setByOperator = (flag, execArgv, nodeOptions) => {
  const name = flag.split('=')[0];
  const negated = `--no-${name.slice(2)}`;
  // V8 spells its options with dashes or underscores alike
  return [...execArgv, ...(nodeOptions ?? '').split(/\s+/)].map((a) => a.replace(/_/g, '-')).some((a) => a === name || a === negated || a.startsWith(`${name}=`));
};
