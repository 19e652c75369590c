// How tap loads the tests' TypeScript (.taprc `node-arg`): esbuild, one transform per file, with
// source maps that carry their sources, so that tap's coverage report maps back to the .ts lines.
//
// Why not tap's default (@tapjs/typescript, ts-node in transpile-only mode): it loads the TypeScript
// compiler into every test process and transpiles each module with it, about 10 s of CPU for a file
// that imports the whole server (cli/kiln.ts), against about 1 s here; with 200 test files on two
// cores that was most of CI's test time. And why not tsx (what bin/kiln.js uses): tsx minifies
// whitespace and leaves the sources out of its maps unless NODE_V8_COVERAGE is set, which makes
// tap's report show every loaded file as 100 % covered, or, with the sources, still misplace the
// ends of uncovered functions.
import { register } from 'node:module';

register('./typescriptHooks.mjs', import.meta.url);
