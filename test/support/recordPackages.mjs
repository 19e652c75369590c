// Loaded with `--import` into a kiln process: appends to $KILN_RECORD_PACKAGES the name of every
// package under node_modules the main thread resolves, once each, as it is resolved
// (test/cli/lazyLibraries.process.test.ts). Serving threads are not recorded.
import { appendFileSync } from 'node:fs';
import { registerHooks } from 'node:module';
import { isMainThread } from 'node:worker_threads';

const file = process.env['KILN_RECORD_PACKAGES'];
if (file && isMainThread) {
  const seen = new Set();
  registerHooks({
    resolve(specifier, context, nextResolve) {
      const resolved = nextResolve(specifier, context);
      const match = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(resolved.url);
      if (match && !seen.has(match[1])) {
        seen.add(match[1]);
        appendFileSync(file, `${match[1]}\n`);
      }
      return resolved;
    },
  });
}
