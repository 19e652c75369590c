// Moves SvelteKit's inline boot script out of build/index.html into a hashed file under
// _app/immutable, so kiln's CSP can say script-src 'self' with no inline script at all.
// Run after `vite build`; argument: the build folder.
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.argv[2] ?? 'build';
const indexPath = join(dir, 'index.html');
const html = readFileSync(indexPath, 'utf8');
const inline = [...html.matchAll(/<script>([\s\S]*?)<\/script>/g)];
if (inline.length !== 1) {
  console.error(`externalBoot: expected one inline <script> in ${indexPath}, found ${inline.length}; did SvelteKit change its boot markup?`);
  process.exit(1);
}
const [whole, body] = inline[0];
// A classic (not module) script: it runs where it stands, so document.currentScript.parentElement
// is still the element SvelteKit mounts into, exactly as with the inline original.
const code = body.trim() + '\n';
const name = `_app/immutable/entry/boot.${createHash('sha256').update(code).digest('hex').slice(0, 10)}.js`;
writeFileSync(join(dir, name), code);
writeFileSync(indexPath, html.replace(whole, `<script src="/${name}"></script>`));
console.log(`externalBoot: boot script moved to /${name}`);
