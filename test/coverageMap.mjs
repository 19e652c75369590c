// Tests that run kiln as a child process (`bin/kiln.js` registers tsx itself) produce coverage
// whose source maps do not merge with the in-process runs and turn the whole report into
// false 100 %s. Such tests are named *.process.test.ts; they count for behaviour, not for
// coverage. Every other test, the in-process CLI tests of test/cli/ included, is measured.
//
// Code that runs only in worker threads is not: tap records coverage through an inspector session
// of the main thread, and piscina's threads are other isolates. The CPU pool's task files
// (storage/cpuWorker.ts and the nars/*Task(s).ts it loads) are therefore also run in-process by
// test/storage/cpuTasks.test.ts, through the entry point piscina calls, which is where their lines count.
export default function coverageMap(testFile) {
  if (/\.process\.test\.ts$/.test(testFile)) return null;
  return [];
}
