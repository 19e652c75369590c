// Writes one index.html per page route, each naming that route's own chunks and styles as
// preloads, so the browser fetches them while the shell boots instead of after the router has
// read the URL (a single-page app's one index.html cannot know the route). kiln serves the
// matching one for a page path (http/frontend/). Run after externalBoot.js; argument: the build
// folder. Writes <build>/_app/routes/<node>.html and <build>/_app/routes/routes.json:
// [{ "route": "/evals/[id]", "html": "/_app/routes/18.html" }, …].
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.argv[2] ?? 'build';
const GENERATED = '.svelte-kit/generated/client-optimized';
const fail = (problem) => {
  console.error(`routePreloads: ${problem}; did SvelteKit change its build output?`);
  process.exit(1);
};

// SvelteKit's route table: route id → [page node, [layout nodes]] (no server loads in this app).
const app = readFileSync(join(GENERATED, 'app.js'), 'utf8');
const literal = /export const dictionary = (\{[\s\S]*?\n\t\});/.exec(app)?.[1];
if (!literal) fail(`no dictionary in ${GENERATED}/app.js`);
/** @type {Record<string, [number, number[]?]>} */
const dictionary = JSON.parse(literal);
/** @type {Record<string, { file: string; imports?: string[]; css?: string[] }>} */
const manifest = JSON.parse(readFileSync('.svelte-kit/output/client/.vite/manifest.json', 'utf8'));

/** The files a manifest entry needs before it runs: itself and its static imports, transitively. */
function closure(key, scripts = new Set(), styles = new Set()) {
  const entry = manifest[key];
  if (!entry) fail(`no manifest entry ${key}`);
  if (scripts.has(entry.file)) return { scripts, styles };
  scripts.add(entry.file);
  for (const css of entry.css ?? []) styles.add(css);
  for (const imported of entry.imports ?? []) closure(imported, scripts, styles);
  return { scripts, styles };
}

const index = readFileSync(join(dir, 'index.html'), 'utf8');
if (!index.includes('<head>') || !index.includes('</head>')) fail('index.html has no <head> or </head>');
/** Already in the shell's own index.html: not named twice. */
const inShell = (file) => index.includes(`"/${file}"`);

/** A script of scripts/ copied into the build as a hashed immutable file; its path. */
function immutableCopy(name) {
  const code = readFileSync(new URL(`./${name}.client.js`, import.meta.url), 'utf8');
  const file = `_app/immutable/entry/${name}.${createHash('sha256').update(code).digest('hex').slice(0, 10)}.js`;
  writeFileSync(join(dir, file), code);
  return file;
}
/**
 * Routes whose index.html also starts their first API reads (scripts/earlyReads.client.js) and draws
 * the first rows from the answer before the shell has booted (scripts/earlyRows.client.js).
 */
const earlyFile = immutableCopy('earlyReads');
const earlyRowsFile = immutableCopy('earlyRows');
const EARLY_READS = new Set(['/evals/[id]']);

const routes = [];
mkdirSync(join(dir, '_app/routes'), { recursive: true });
for (const [route, [page, layouts = []]] of Object.entries(dictionary)) {
  // kiln matches a path segment by segment: a literal or a [param]; anything else is refused here.
  const unsupported = route.split('/').filter(Boolean).find((s) => s.includes('[') && !/^\[\w+\]$/.test(s) || s.includes('('));
  if (unsupported) fail(`route ${route} has a segment kiln cannot match (${unsupported}); teach http/frontend/routeIndex.ts it`);
  const scripts = new Set();
  const styles = new Set();
  for (const node of [...layouts, page]) closure(`${GENERATED}/nodes/${node < 0 ? ~node : node}.js`, scripts, styles);
  const links = [
    ...[...scripts].filter((f) => !inShell(f)).map((f) => `<link href="/${f}" rel="modulepreload">`),
    // A preload, not a stylesheet: the page does not wait for it to paint; the router links it when the page mounts.
    ...[...styles].filter((f) => !inShell(f)).map((f) => `<link href="/${f}" rel="preload" as="style">`),
  ];
  const html = `/_app/routes/${page}.html`;
  // The early-reads script goes first in the head: the browser requests it before the shell's dozen
  // module preloads, which would otherwise hold the connections it waits for. The early rows script is
  // deferred: it runs once the document is parsed (it draws into #app), without holding the parser.
  const early = EARLY_READS.has(route) ? `\n\t\t<script src="/${earlyFile}"></script>\n\t\t<script src="/${earlyRowsFile}" defer></script>` : '';
  writeFileSync(join(dir, html), index.replace('<head>', `<head>${early}`).replace('</head>', `${links.map((l) => `\t\t${l}\n`).join('')}  </head>`));
  routes.push({ route, html });
}
writeFileSync(join(dir, '_app/routes/routes.json'), JSON.stringify(routes, null, 1) + '\n');
console.log(`routePreloads: ${routes.length} routes with their own preloads`);
