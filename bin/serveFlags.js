// The environment and V8 options `kiln serve` runs with (docs/http.md, "Memory at rest: the
// process's options"), in one place for bin/kiln.js and the benches that start a server process of
// their own.
//
// Dropped V8 options: `--max-semi-space-size=2` (the young generation capped, ~30 MiB less at rest) and
// `--optimize-for-size` (~5 MiB less heap) were tried and dropped. They did not cost a narinfo
// answer anything measurable, but the scheduler's CPU per dispatched build went from 237-263 µs to
// 482-496 µs with both, 524 µs with `--optimize-for-size` alone and 267-312 µs with the young
// generation at 2-8 MiB a semi-space (dispatch bench, 10,000 builds, quiet machine, 2026-11-27).

/**
 * Each variable unless the operator set it. MALLOC_ARENA_MAX: glibc gives each thread that
 * allocates its own malloc arena (up to 8 a core), and the pages freed in one arena do not serve
 * another; with the serving threads and V8's helper threads the server held 10-18 MiB more
 * (cpu-per-request: 175 → 164 MiB at rest, 253 → 235 after the runs, CPU per request within the
 * noise; the dispatch bench's CPU per build 253-254 against 251-257 µs without it).
 */
export const SERVE_ENV = { MALLOC_ARENA_MAX: '2' };

/**
 * V8 options added to the command line unless the operator gave them. `--no-parallel-scavenge`:
 * a young-generation collection runs on the isolate's own thread instead of sharing its work with
 * V8's helper threads, which every isolate of the process shares. A serving thread's collection
 * waited for those helpers (descheduled on a loaded 2-core machine): 34-39 ms paused per 100,000
 * narinfo hits, the longest pauses 19-76 ms, against 4.4-10.7 ms and 2.1-9.7 ms without them
 * (issue 22, the hit p99; docs/http.md, "The young generation's size and the collector's helpers"). The dispatch bench's CPU per build did not get worse (463-576 µs
 * with parallel scavenges, 415-564 µs without; 2026-11-28, load 24-32).
 */
export const SERVE_V8_FLAGS = ['--no-parallel-scavenge'];
