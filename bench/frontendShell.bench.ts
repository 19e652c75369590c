// `npm run bench -- frontend-shell`: the bytes a browser fetches to show the web UI's first page,
// gzipped as kiln serves them, against the budget of 150 KB (JS + CSS); also every JS and CSS file.
import { gzipSync } from 'node:zlib';
import { loadFrontendBuild } from '../http/frontend/frontendBuild.js';

const BUDGET = 150 * 1024;
const build = loadFrontendBuild();
if (!build.ok) throw new Error(build.problem);

const gzipped = (path: string): number => {
  const file = build.files.get(path);
  if (!file) throw new Error(`index.html names ${path}, which the build does not have`);
  return file.variants.find((v) => v.encoding === 'gzip')?.body.length ?? gzipSync(file.body, { level: 9 }).length;
};

// The shell: what index.html names (modulepreload links, stylesheets, the boot script).
const html = build.index.body.toString('utf8');
const named = [...html.matchAll(/(?:href|src)="(\/_app\/[^"]+\.(?:js|css))"/g)].map((m) => m[1]!);
const shell = [...new Set(named)];
const shellBytes = shell.reduce((sum, path) => sum + gzipped(path), 0);
const everything = [...build.files.keys()].filter((p) => /\.(js|css)$/.test(p));
const allBytes = everything.reduce((sum, path) => sum + gzipped(path), 0);

console.log(JSON.stringify({
  bench: 'frontend-shell',
  shellFiles: shell.length,
  shellGzipBytes: shellBytes,
  allJsCssFiles: everything.length,
  allJsCssGzipBytes: allBytes,
  budgetBytes: BUDGET,
  withinBudget: shellBytes <= BUDGET,
}));
