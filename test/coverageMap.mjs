// Tests that run kiln as a child process (`bin/kiln.js` registers tsx itself) produce coverage
// whose source maps do not merge with the in-process runs and turn the whole report into
// false 100 %s. Such tests are named *.process.test.ts; they count for behaviour, not for
// coverage. Every other test, the in-process CLI tests of test/cli/ included, is measured.
export default function coverageMap(testFile) {
  if (/\.process\.test\.ts$/.test(testFile)) return null;
  return [];
}
