// Named steps of finalize where a crash leaves the most to recover from: the staged bytes checked
// and nothing stored; the path stored and signed while the staged file and row remain; the staged
// file removed while its row remains. The crash test stops a real server process at one of them
// (`kiln serve` with KILN_TEST_HOLD_AT=<point>) and kills it there, instead of after a guessed delay.
// Garbage collection has two (docs/gc.md, "Passes and deep rounds"): a pass's page of copies removed
// and committed while their blobs remain; a deep round after its first unit of files.
export type CrashPoint = 'finalize.checked' | 'finalize.ingested' | 'finalize.stagedFileRemoved' | 'gc.pass.pageRemoved' | 'gc.deep.unitChecked';

/** Called at each point; resolves to go on (a held point never resolves). */
export type CrashPoints = (point: CrashPoint) => Promise<void>;
