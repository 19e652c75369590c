// Tests that run kiln as a child process (`bin/kiln.js` registers tsx itself) produce coverage
// whose source maps do not merge with the in-process runs and turn the whole report into
// false 100 %s. Such tests are named *.process.test.ts or live in test/cli/; they count for
// behaviour, not for coverage.
export default function coverageMap(testFile) {
  if (/(^|\/)test\/cli\//.test(testFile) || /\.process\.test\.ts$/.test(testFile)) return null;
  return [];
}
