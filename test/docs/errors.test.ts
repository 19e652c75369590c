import t from 'tap';
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

// docs/errors.md and the source must name the same codes, each with the same status.
const root = fileURLToPath(new URL('../..', import.meta.url));
const sourceFolders = ['protocol', 'config', 'storage', 'actors', 'supervisors', 'services', 'http', 'cli', 'worker'];

async function* tsFiles(dir: string): AsyncGenerator<string> {
  for (const entry of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* tsFiles(path);
    else if (entry.name.endsWith('.ts')) yield path;
  }
}

t.test('every error code is documented, and every documented code is used', async (t) => {
  const used = new Map<string, Set<number>>();
  const pattern = /(?:ApiError|errorReply)\(\s*(\d{3}),\s*'([a-z_]+)'/g;
  for (const folder of sourceFolders) {
    for await (const file of tsFiles(join(root, folder))) {
      for (const m of (await readFile(file, 'utf8')).matchAll(pattern)) {
        const set = used.get(m[2]!) ?? new Set<number>();
        set.add(Number(m[1]));
        used.set(m[2]!, set);
      }
    }
  }
  const documented = new Map<string, number>();
  for (const line of (await readFile(join(root, 'docs/errors.md'), 'utf8')).split('\n')) {
    const row = /^\| ([a-z_]+) \| (\d{3}) \|/.exec(line);
    if (row) documented.set(row[1]!, Number(row[2]));
  }
  t.ok(used.size > 0, 'found codes in the source');
  for (const [code, statuses] of used) {
    t.ok(documented.has(code), `${code} is listed in docs/errors.md`);
    if (documented.has(code)) t.ok(statuses.has(documented.get(code)!), `${code}: documented status ${documented.get(code)} is one the source uses (${[...statuses].join(', ')})`);
  }
  for (const code of documented.keys()) t.ok(used.has(code), `${code} (docs/errors.md) is still used in the source`);
});
