// `npm run bench -- <name> [args…]`: runs bench/<name>.bench.ts (the name in kebab case or as the
// file is spelt) in a child process with the remaining arguments; no name lists the benches.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const dir = fileURLToPath(new URL('.', import.meta.url));
const kebab = (s: string) => s.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
const benches = new Map(readdirSync(dir).filter((f) => f.endsWith('.bench.ts')).map((f) => [kebab(f.slice(0, -'.bench.ts'.length)), f]));
const [name, ...args] = process.argv.slice(2);
const file = name === undefined ? undefined : benches.get(kebab(name)) ?? benches.get(name);
if (!file) {
  console.error(`${name === undefined ? 'name a bench' : `no bench "${name}"`}; one of: ${[...benches.keys()].sort().join(', ')}`);
  process.exit(2);
}
const result = spawnSync(process.execPath, ['--import', 'tsx', `${dir}${file}`, ...args], { stdio: 'inherit' });
process.exit(result.status ?? 1);
